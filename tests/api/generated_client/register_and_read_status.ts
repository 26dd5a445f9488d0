// A register-and-read-status call typed by the client openapi-typescript generates from
// openapi/openapi.json (tests/api/test_generated_client.py writes schema.d.ts beside this file
// and runs `tsc --noEmit --strict`). Each `@ts-expect-error` line must fail to type-check: were
// the generated types loose (an untyped map, `unknown`), the directive would be unused, which
// tsc reports as an error, so the test would fail.
import type { components, paths } from "./schema";

type Register = paths["/v1/datasets/{dataset_id}/invocations"]["post"];
type RegisterBody = Register["requestBody"]["content"]["application/json"];
type Registered = Register["responses"][201]["content"]["application/json"];
type Refused = Register["responses"][409]["content"]["application/json"];
type DatasetRead =
  paths["/v1/datasets/{dataset_id}"]["get"]["responses"][200]["content"]["application/json"];
type Amount = Registered["charge"];
type EpsilonDelta = components["schemas"]["EpsilonDeltaAmount"];

/** A Gaussian declaration (σ = 2.5 as decimal text, Δ = 1 as a number). */
export const gaussian: RegisterBody = {
  mechanism: { type: "gaussian", sigma: "2.5", sensitivity: 1 },
};

// @ts-expect-error: a Gaussian declares sigma, not epsilon
export const misspelt: RegisterBody = { mechanism: { type: "gaussian", epsilon: "1" } };

// @ts-expect-error: composed takes a list or one mechanism with its count, never neither
export const neither: RegisterBody = { mechanism: { type: "composed" } };

/** The dataset's charge when it is counted in (ε, δ) (a basic dataset), else undefined. */
export function epsilonOf(amount: Amount): string | undefined {
  if ("epsilon" in amount) {
    const narrowed: EpsilonDelta = amount;
    return narrowed.epsilon;
  }
  if ("rho" in amount) {
    // @ts-expect-error: a (ρ, δ) amount has no epsilon
    return amount.epsilon;
  }
  if ("orders" in amount) {
    const curve: string[] = amount.rdp;
    return curve.length === amount.orders.length ? undefined : undefined;
  }
  const muSquared: string = amount.mu_squared;
  return muSquared === "" ? undefined : undefined;
}

// @ts-expect-error: an (ε, δ) amount has both keys
export const halfAnAmount: Amount = { epsilon: "0.1" };

export interface Reading {
  charge: Amount;
  epsilonCharged: string | undefined;
  guaranteeEpsilon: string;
}

/** Register the Gaussian on a dataset, then read the dataset's status. */
export async function registerAndReadStatus(
  base: string,
  key: string,
  datasetId: string,
): Promise<Reading | Refused> {
  const headers = { Authorization: `Bearer ${key}`, "Content-Type": "application/json" };
  const registered = await fetch(`${base}/v1/datasets/${datasetId}/invocations`, {
    method: "POST",
    headers,
    body: JSON.stringify(gaussian),
  });
  if (registered.status === 409) {
    const refused = (await registered.json()) as Refused;
    const left: Amount = refused.remaining;
    return { ...refused, remaining: left };
  }
  const created = (await registered.json()) as Registered;
  const read = await fetch(`${base}/v1/datasets/${datasetId}`, { headers });
  const dataset = (await read.json()) as DatasetRead;
  const guaranteeEpsilon: string = dataset.status.summary.guarantee.epsilon;
  // @ts-expect-error: the guarantee's epsilon is decimal text, not a JSON number
  const asNumber: number = dataset.status.summary.guarantee.epsilon;
  return {
    charge: created.charge,
    epsilonCharged: epsilonOf(created.charge),
    guaranteeEpsilon: asNumber > 0 ? guaranteeEpsilon : guaranteeEpsilon,
  };
}

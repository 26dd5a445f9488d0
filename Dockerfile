# The odometer service: migrations, then uvicorn. Configure with DATABASE_URL and
# ODOMETER_ADMIN_KEY (see README.md); by default it keeps a SQLite file in /data.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /srv/odometer
COPY pyproject.toml README.md ./
COPY core ./core
COPY client ./client
COPY app ./app
# three distributions of one repository: the client (the `odometer` command), the accounting
# core and ledger format, and the server
RUN pip install ./client ./core .
COPY alembic.ini ./
COPY migrations ./migrations

# /data: the embedded SQLite database; /var/lib/odometer-witness: where docker-compose.yml
# mounts the witness of ledger heads (a named volume takes this directory's owner)
RUN useradd --system --uid 10001 --home-dir /srv/odometer odometer \
    && mkdir -p /data /var/lib/odometer-witness \
    && chown odometer:odometer /data /var/lib/odometer-witness
USER odometer

ENV DATABASE_URL=sqlite:////data/odometer.db \
    HOST=0.0.0.0 \
    PORT=8000 \
    WORKERS=2
EXPOSE 8000
VOLUME ["/data"]

CMD ["sh", "-c", "alembic upgrade head && exec python -m app.serve --host \"$HOST\" --port \"$PORT\" --workers \"$WORKERS\" --proxy-headers"]

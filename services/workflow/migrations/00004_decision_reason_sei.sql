-- +goose Up
-- Why a task was decided as it was (POST /v1/tasks/{id}/complete "reason",
-- required for a rejection). Nullable without a default: adding it rewrites
-- nothing; the service role's table-level grant covers the new column.
ALTER TABLE task ADD COLUMN reason text;

-- A request's registration in SEI, the public administration's protocol
-- system (integration.sei.register.v1). The row is written as 'pending' in
-- the transaction that approves the process, so an approval whose
-- registration has not happened yet is visible; the consumer then records
-- each call to SEI: attempts and the last error while it is retried,
-- 'registered' with SEI's number, or 'rejected' with SEI's reason. One row
-- per request: what makes the registration idempotent on this side (SEI's
-- side is the request id sent as idempotency key). The service role gets
-- its DML grant from the owner's default privileges (deploy/postgres).
CREATE TABLE sei_registration (
    tenant_id     text        NOT NULL,
    request_id    uuid        NOT NULL,
    status        text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'registered', 'rejected')),
    unit          text,
    sei_number    text,
    attempts      integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    last_error    text,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    registered_at timestamptz,
    PRIMARY KEY (tenant_id, request_id),
    -- A number exactly when registered.
    CONSTRAINT sei_registration_number CHECK ((status = 'registered') = (sei_number IS NOT NULL AND registered_at IS NOT NULL))
);

ALTER TABLE sei_registration ENABLE ROW LEVEL SECURITY;
ALTER TABLE sei_registration FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON sei_registration USING (tenant_id = current_setting('app.tenant_id', true));

-- +goose Down
DROP TABLE sei_registration;
ALTER TABLE task DROP COLUMN reason;

-- +goose Up
-- Contact addresses are personal data: they live here only, fed by the
-- contacts API. Events carry the citizen id and this table resolves it.
CREATE TABLE contact (
    tenant_id         text        NOT NULL,
    citizen_id        text        NOT NULL,
    email             text,
    phone             text,
    preferred_channel text        NOT NULL CHECK (preferred_channel IN ('email', 'sms', 'whatsapp')),
    updated_by        text        NOT NULL,
    updated_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, citizen_id)
);

-- One row per message we owe a citizen; the address is not copied here so
-- that erasing a contact erases it everywhere.
CREATE TABLE notification (
    id              uuid        PRIMARY KEY,
    tenant_id       text        NOT NULL,
    source_event_id uuid        NOT NULL,
    request_id      uuid,
    citizen_id      text        NOT NULL,
    channel         text        NOT NULL CHECK (channel IN ('email', 'sms', 'whatsapp')),
    template        text        NOT NULL,
    status          text        NOT NULL CHECK (status IN ('pending', 'sent', 'failed')),
    attempts        integer     NOT NULL DEFAULT 0,
    last_error      text,
    failure_reason  text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    sent_at         timestamptz,
    UNIQUE (tenant_id, source_event_id)
);
CREATE INDEX notification_request ON notification (tenant_id, request_id);

ALTER TABLE contact ENABLE ROW LEVEL SECURITY;
ALTER TABLE contact FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON contact USING (tenant_id = current_setting('app.tenant_id', true));
ALTER TABLE notification ENABLE ROW LEVEL SECURITY;
ALTER TABLE notification FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON notification USING (tenant_id = current_setting('app.tenant_id', true));

-- +goose Down
DROP TABLE notification;
DROP TABLE contact;

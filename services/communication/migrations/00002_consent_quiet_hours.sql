-- +goose Up
-- Consent and quiet hours (notify.Decide). A contact without a row here, or
-- stored before this migration, has consented to progress notices and has
-- no quiet hours.
ALTER TABLE contact
    ADD COLUMN progress_notices boolean NOT NULL DEFAULT true,
    ADD COLUMN quiet_start      text,
    ADD COLUMN quiet_end        text,
    ADD COLUMN quiet_time_zone  text,
    ADD CONSTRAINT contact_quiet_hours CHECK ((quiet_start IS NULL) = (quiet_end IS NULL)
                                              AND (quiet_start IS NULL) = (quiet_time_zone IS NULL));

-- held: waiting for the end of quiet hours; withheld: never sent, for want
-- of consent. A held notification keeps what sending it later needs: the
-- template's parameters (protocol, status: no personal data) and its cause's
-- envelope header, so notification-sent.v1 still joins the conversation.
ALTER TABLE notification DROP CONSTRAINT notification_status_check;
ALTER TABLE notification ADD CONSTRAINT notification_status_check
    CHECK (status IN ('pending', 'held', 'sent', 'failed', 'withheld'));
ALTER TABLE notification
    ADD COLUMN params     jsonb,
    ADD COLUMN cause      jsonb,
    ADD COLUMN not_before timestamptz;

-- The dispatcher's index of held notifications across tenants. It has no
-- personal data and no row-level security, like the workflow's sla_timer:
-- the dispatcher reads it unscoped, then handles each notification under
-- its tenant's scope.
CREATE TABLE notification_hold (
    notification_id uuid        PRIMARY KEY,
    tenant_id       text        NOT NULL,
    not_before      timestamptz NOT NULL
);
CREATE INDEX notification_hold_due ON notification_hold (not_before);

-- +goose Down
DROP TABLE notification_hold;
ALTER TABLE notification DROP COLUMN not_before, DROP COLUMN cause, DROP COLUMN params;
DELETE FROM notification WHERE status IN ('held', 'withheld');
ALTER TABLE notification DROP CONSTRAINT notification_status_check;
ALTER TABLE notification ADD CONSTRAINT notification_status_check CHECK (status IN ('pending', 'sent', 'failed'));
ALTER TABLE contact DROP CONSTRAINT contact_quiet_hours,
    DROP COLUMN quiet_time_zone, DROP COLUMN quiet_end, DROP COLUMN quiet_start, DROP COLUMN progress_notices;

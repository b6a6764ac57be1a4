-- +goose Up
-- Events start workflows (seed 004 §19): a start-workflow reaction opens a
-- process of its subscription's definition for the event's entity. The
-- request's own process (started by its submission) stays the one per
-- request; a reaction's process is one per triggering event and
-- subscription, so a redelivered or replayed event, even one the inbox no
-- longer remembers, starts nothing more.
ALTER TABLE process_instance
    ADD COLUMN subscription_id  uuid,
    ADD COLUMN trigger_event_id uuid,
    ADD COLUMN entity_type      text,
    ADD COLUMN entity_id        text,
    ADD CONSTRAINT process_instance_reaction_origin
        CHECK ((subscription_id IS NULL) = (trigger_event_id IS NULL));
ALTER TABLE process_instance DROP CONSTRAINT process_instance_tenant_id_request_id_key;
CREATE UNIQUE INDEX process_instance_request ON process_instance (tenant_id, request_id) WHERE subscription_id IS NULL;
CREATE UNIQUE INDEX process_instance_reaction ON process_instance (tenant_id, trigger_event_id, subscription_id)
    WHERE subscription_id IS NOT NULL;

-- What an approval that holds a start back needs to start it later: the
-- entity and the request the decision was about.
ALTER TABLE reaction_decision
    ADD COLUMN entity_type text,
    ADD COLUMN entity_id   text,
    ADD COLUMN request_id  uuid;

-- +goose Down
ALTER TABLE reaction_decision DROP COLUMN request_id, DROP COLUMN entity_id, DROP COLUMN entity_type;
DROP INDEX process_instance_reaction;
DROP INDEX process_instance_request;
ALTER TABLE process_instance ADD CONSTRAINT process_instance_tenant_id_request_id_key UNIQUE (tenant_id, request_id);
ALTER TABLE process_instance DROP CONSTRAINT process_instance_reaction_origin,
    DROP COLUMN entity_id, DROP COLUMN entity_type, DROP COLUMN trigger_event_id, DROP COLUMN subscription_id;

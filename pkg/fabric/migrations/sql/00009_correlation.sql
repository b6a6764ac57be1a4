-- +goose Up
-- A request's journey (package ops, the operator console): every event a
-- service emitted and every event each of its consumers committed, found by
-- correlation id. The columns are also in the envelope (outbox body), but a
-- lookup there would scan the table; these make it an index probe. Nullable
-- without a default: adding them rewrites nothing.
ALTER TABLE outbox_event ADD COLUMN correlation_id text, ADD COLUMN causation_id text;
CREATE INDEX IF NOT EXISTS outbox_event_correlation ON outbox_event (correlation_id) WHERE correlation_id IS NOT NULL;
ALTER TABLE inbox_message ADD COLUMN correlation_id text;
CREATE INDEX IF NOT EXISTS inbox_message_correlation ON inbox_message (correlation_id) WHERE correlation_id IS NOT NULL;

-- +goose Down
DROP INDEX IF EXISTS inbox_message_correlation;
ALTER TABLE inbox_message DROP COLUMN correlation_id;
DROP INDEX IF EXISTS outbox_event_correlation;
ALTER TABLE outbox_event DROP COLUMN correlation_id, DROP COLUMN causation_id;

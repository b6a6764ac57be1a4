-- +goose Up
-- GET /v1/history pages a tenant's events in (occurred_at, event_id) order:
-- keyset pagination walks this index from the cursor on.
CREATE INDEX lineage_history ON lineage (tenant_id, occurred_at, event_id);

-- +goose Down
DROP INDEX lineage_history;

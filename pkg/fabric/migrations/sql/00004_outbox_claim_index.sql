-- +goose Up
-- The claim scan gets an index of its own that the per-aggregate ordering
-- probe cannot use. With the old index (seq) WHERE published_at IS NULL,
-- stale statistics (a backlog built up after the last ANALYZE, e.g. while
-- the broker was down) made the planner think that index empty and scan it
-- whole for every probe instead of using (aggregate_type, aggregate_id,
-- seq): each batch of N aggregates then cost N × backlog row visits. The
-- claim query repeats the extra, always-true predicate; the probe does not,
-- so only the aggregate index matches it.
DROP INDEX outbox_event_pending;
CREATE INDEX outbox_event_claimable ON outbox_event (seq) WHERE published_at IS NULL AND publication_attempts >= 0;

-- +goose Down
DROP INDEX outbox_event_claimable;
CREATE INDEX outbox_event_pending ON outbox_event (seq) WHERE published_at IS NULL;

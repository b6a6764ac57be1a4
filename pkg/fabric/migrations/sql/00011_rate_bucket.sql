-- +goose Up
-- Shared token buckets (package ratelimit): a limit that holds across every
-- instance of a service (a paced consumer calling an external party with a
-- quota, seed 003's "ritmo controlado"). Instances lease tokens in small
-- chunks, so the table sees one update per chunk, not per message.
CREATE TABLE rate_bucket (
    name       text             PRIMARY KEY,
    tokens     double precision NOT NULL,
    updated_at timestamptz      NOT NULL
);

-- +goose Down
DROP TABLE rate_bucket;

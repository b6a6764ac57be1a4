-- +goose Up
-- An approval or review is resolved by a person (seed 004 §24-25: actor
-- USER): approving an approval runs the reaction it held back.
ALTER TABLE reaction_review
    ADD COLUMN resolution      text CHECK (resolution IN ('approved', 'rejected')),
    ADD COLUMN resolved_by     text,
    ADD COLUMN resolved_reason text,
    ADD COLUMN resolved_at     timestamptz,
    ADD COLUMN follows         uuid REFERENCES reaction_review (id);
CREATE INDEX reaction_review_open ON reaction_review (tenant_id, created_at) WHERE status = 'open';

-- +goose Down
DROP INDEX reaction_review_open;
ALTER TABLE reaction_review DROP COLUMN follows, DROP COLUMN resolved_at, DROP COLUMN resolved_reason,
    DROP COLUMN resolved_by, DROP COLUMN resolution;

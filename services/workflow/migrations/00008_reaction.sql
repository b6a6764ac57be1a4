-- +goose Up
-- The reactive fabric's decisions (seed 004 §19-21, §24-25, §68): for every
-- event an active subscription matched, what its policy decided, for whom
-- and what came of it. One row per (event, subscription): a redelivered
-- event is decided once. "Why did the platform do this?" is a query here.
CREATE TABLE reaction_decision (
    id                   uuid        PRIMARY KEY,
    tenant_id            text        NOT NULL,
    event_id             uuid        NOT NULL,
    event_type           text        NOT NULL,
    correlation_id       text        NOT NULL,
    subscription_id      uuid        NOT NULL,
    subscription_version integer     NOT NULL,
    outcome              text        NOT NULL CHECK (outcome IN ('ALLOW', 'REQUIRE_APPROVAL', 'REQUIRE_HUMAN_REVIEW', 'DENY')),
    rule                 integer,    -- the policy rule that decided; NULL: the default
    actor_type           text        NOT NULL CHECK (actor_type IN ('SYSTEM', 'AGENT', 'USER')),
    actor                text        NOT NULL,
    status               text        NOT NULL,
    detail               text        NOT NULL,
    review_id            uuid,
    decided_at           timestamptz NOT NULL,
    UNIQUE (event_id, subscription_id)
);
CREATE INDEX reaction_decision_correlation ON reaction_decision (tenant_id, correlation_id);
ALTER TABLE reaction_decision ENABLE ROW LEVEL SECURITY;
ALTER TABLE reaction_decision FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON reaction_decision USING (tenant_id = current_setting('app.tenant_id', true));

-- Work a decision left for people: an approval the reaction waits for, or
-- a review.
CREATE TABLE reaction_review (
    id          uuid        PRIMARY KEY,
    tenant_id   text        NOT NULL,
    decision_id uuid        NOT NULL REFERENCES reaction_decision (id),
    kind        text        NOT NULL CHECK (kind IN ('approval', 'review')),
    role        text        NOT NULL,
    status      text        NOT NULL DEFAULT 'open',
    created_at  timestamptz NOT NULL
);
ALTER TABLE reaction_review ENABLE ROW LEVEL SECURITY;
ALTER TABLE reaction_review FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON reaction_review USING (tenant_id = current_setting('app.tenant_id', true));

-- +goose Down
DROP TABLE reaction_review;
DROP TABLE reaction_decision;

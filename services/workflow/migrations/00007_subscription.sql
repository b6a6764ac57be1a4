-- +goose Up
-- Subscriptions of the reactive fabric (seed 004 §17-18, §72-74; package
-- internal/subscription): one row per version, each with its lifecycle
-- state; at most one ACTIVE version per subscription.
CREATE TABLE subscription (
    id          uuid        NOT NULL,
    version     integer     NOT NULL CHECK (version > 0),
    tenant_id   text        NOT NULL,
    name        text        NOT NULL,
    event_types text[]      NOT NULL,
    filter      text        NOT NULL,
    policy      jsonb       NOT NULL,
    reaction    jsonb       NOT NULL,
    state       text        NOT NULL CHECK (state IN ('DRAFT', 'VALIDATING', 'APPROVED', 'ACTIVE', 'DISABLED', 'DEPRECATED', 'REMOVED')),
    created_by  text        NOT NULL,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (id, version)
);
CREATE UNIQUE INDEX subscription_one_active ON subscription (id) WHERE state = 'ACTIVE';
CREATE INDEX subscription_tenant ON subscription (tenant_id, id);
ALTER TABLE subscription ENABLE ROW LEVEL SECURITY;
ALTER TABLE subscription FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON subscription USING (tenant_id = current_setting('app.tenant_id', true));

-- Every lifecycle transition: who moved which version from where to where, and why.
CREATE TABLE subscription_transition (
    id              bigserial   PRIMARY KEY,
    tenant_id       text        NOT NULL,
    subscription_id uuid        NOT NULL,
    version         integer     NOT NULL,
    from_state      text        NOT NULL,
    to_state        text        NOT NULL,
    actor           text        NOT NULL,
    reason          text        NOT NULL,
    at              timestamptz NOT NULL
);
CREATE INDEX subscription_transition_sub ON subscription_transition (tenant_id, subscription_id, id);
ALTER TABLE subscription_transition ENABLE ROW LEVEL SECURITY;
ALTER TABLE subscription_transition FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON subscription_transition USING (tenant_id = current_setting('app.tenant_id', true));

-- +goose Down
DROP TABLE subscription_transition;
DROP TABLE subscription;

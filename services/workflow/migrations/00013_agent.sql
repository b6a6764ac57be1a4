-- +goose Up
-- The agentic reaction (seed 004: Event → Deterministic Resolution →
-- Knowledge → LLM → Structured Decision → Policy → Workflow). A
-- subscription version may declare an agent step (internal/subscription,
-- Agent); it is part of the version, so it never changes once written.
ALTER TABLE subscription ADD COLUMN agent jsonb;

-- What the agent step of a decision did (actor AGENT on the decision):
-- the model asked, a digest of exactly what was sent to it, its proposal
-- (when valid), the passages of the tenant's documents it was given, the
-- knowledge version they came from and the service's release; or why its
-- answer was not used. One row per decision.
CREATE TABLE agent_decision (
    decision_id       uuid        PRIMARY KEY REFERENCES reaction_decision (id),
    tenant_id         text        NOT NULL,
    model             text        NOT NULL,
    prompt_digest     text        NOT NULL,
    proposal          jsonb,
    passages          jsonb       NOT NULL,
    knowledge_version text        NOT NULL,
    release           text        NOT NULL,
    failure           text,
    created_at        timestamptz NOT NULL
);
ALTER TABLE agent_decision ENABLE ROW LEVEL SECURITY;
ALTER TABLE agent_decision FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON agent_decision USING (tenant_id = current_setting('app.tenant_id', true));

-- +goose Down
DROP TABLE agent_decision;
ALTER TABLE subscription DROP COLUMN agent;

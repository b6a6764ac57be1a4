-- +goose Up
-- The agent step per affected request (issue 31's third slice): a mass
-- reaction (review-affected-requests) whose subscription declares an agent
-- step asks the agent about each open request it affects, in the job's
-- batches, after the blast-radius gate.
--
-- The job keeps what the step may see of its event: the projection (the
-- fields the step names, CONFIDENTIAL ones masked, RESTRICTED ones left
-- out) written when the decision was recorded; the event itself is not
-- kept. NULL with agent_step: no model was configured then.
ALTER TABLE reaction_job ADD COLUMN agent_step boolean NOT NULL DEFAULT false, ADD COLUMN agent_event jsonb;

-- A per-request agent step is recorded like a per-event one, with the
-- request it was about and the outcome the policy made of it (a per-event
-- step's outcome is its decision's).
ALTER TABLE agent_decision
    ADD COLUMN request_id uuid,
    ADD COLUMN outcome    text CHECK (outcome IN ('ALLOW', 'REQUIRE_APPROVAL', 'REQUIRE_HUMAN_REVIEW')),
    ADD CONSTRAINT agent_decision_request_outcome CHECK ((request_id IS NULL) = (outcome IS NULL));
ALTER TABLE agent_decision DROP CONSTRAINT agent_decision_pkey;
CREATE UNIQUE INDEX agent_decision_event ON agent_decision (decision_id) WHERE request_id IS NULL;
CREATE UNIQUE INDEX agent_decision_request ON agent_decision (decision_id, request_id) WHERE request_id IS NOT NULL;

-- A request's approval, once approved, is followed by the reaction's review
-- of the same request: one first review or approval per decision and
-- request, and what follows it.
DROP INDEX reaction_review_request;
CREATE UNIQUE INDEX reaction_review_request ON reaction_review (decision_id, request_id)
    WHERE request_id IS NOT NULL AND follows IS NULL;

-- +goose Down
DROP INDEX reaction_review_request;
DELETE FROM review_timer WHERE review_id IN (SELECT id FROM reaction_review WHERE request_id IS NOT NULL AND follows IS NOT NULL);
DELETE FROM reaction_review WHERE request_id IS NOT NULL AND follows IS NOT NULL;
CREATE UNIQUE INDEX reaction_review_request ON reaction_review (decision_id, request_id) WHERE request_id IS NOT NULL;
DROP INDEX agent_decision_request;
DROP INDEX agent_decision_event;
DELETE FROM agent_decision WHERE request_id IS NOT NULL;
ALTER TABLE agent_decision DROP CONSTRAINT agent_decision_request_outcome, DROP COLUMN outcome, DROP COLUMN request_id;
ALTER TABLE agent_decision ADD PRIMARY KEY (decision_id);
ALTER TABLE reaction_job DROP COLUMN agent_event, DROP COLUMN agent_step;

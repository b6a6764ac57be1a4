-- +goose Up
-- A request its citizen cancelled (request.cancelled.v1) stops its process:
-- the process and its open tasks become cancelled. A cancellation that
-- arrives before the submission is recorded as a cancelled process with no
-- task, so the late start finds the request taken and starts nothing.
ALTER TABLE process_instance DROP CONSTRAINT process_instance_status_check;
ALTER TABLE process_instance ADD CONSTRAINT process_instance_status_check
    CHECK (status IN ('running', 'completed', 'cancelled'));
ALTER TABLE task DROP CONSTRAINT task_status_check;
ALTER TABLE task ADD CONSTRAINT task_status_check
    CHECK (status IN ('open', 'completed', 'cancelled'));

-- +goose Down
ALTER TABLE task DROP CONSTRAINT task_status_check;
ALTER TABLE task ADD CONSTRAINT task_status_check CHECK (status IN ('open', 'completed'));
ALTER TABLE process_instance DROP CONSTRAINT process_instance_status_check;
ALTER TABLE process_instance ADD CONSTRAINT process_instance_status_check CHECK (status IN ('running', 'completed'));

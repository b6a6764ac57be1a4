-- +goose Up
-- The timer tables get row-level security like every other tenant table.
-- Their sweeps (SLA, watchdog, schedules, mass reactions) find due timers
-- of every tenant, so the policy also admits the platform scope
-- (app.scope = 'platform', tenant.Platform), which a sweep opts into for
-- that one query before handling each timer in its tenant's scope.

-- +goose StatementBegin
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['sla_timer', 'stuck_timer', 'schedule_timer', 'reaction_job_timer'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format($p$CREATE POLICY tenant_isolation ON %I USING (
            tenant_id = current_setting('app.tenant_id', true)
            OR current_setting('app.scope', true) = 'platform')$p$, t);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['sla_timer', 'stuck_timer', 'schedule_timer', 'reaction_job_timer'] LOOP
        EXECUTE format('DROP POLICY tenant_isolation ON %I', t);
        EXECUTE format('ALTER TABLE %I NO FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I DISABLE ROW LEVEL SECURITY', t);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Up
-- The dispatcher's index of held notifications gets row-level security like
-- every other tenant table. The dispatcher finds due holds of every tenant,
-- so the policy also admits the platform scope (app.scope = 'platform',
-- tenant.Platform), which it opts into for that one query before handling
-- each notification in its tenant's scope.
ALTER TABLE notification_hold ENABLE ROW LEVEL SECURITY;
ALTER TABLE notification_hold FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON notification_hold USING (
    tenant_id = current_setting('app.tenant_id', true)
    OR current_setting('app.scope', true) = 'platform');

-- +goose Down
DROP POLICY tenant_isolation ON notification_hold;
ALTER TABLE notification_hold NO FORCE ROW LEVEL SECURITY;
ALTER TABLE notification_hold DISABLE ROW LEVEL SECURITY;

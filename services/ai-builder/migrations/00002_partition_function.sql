-- +goose Up
-- Per-tenant chunk partitions are created on first use, while the service
-- runs. DDL needs the table's owner, and the service's role owns nothing
-- (deploy/postgres), so this function, created here by the owner, does that
-- one thing with the owner's rights. It takes only a tenant id and the
-- partition name the service derives from it, checks both, and builds every
-- statement with format(%I/%L): no caller text reaches SQL unquoted.
--
-- SECURITY DEFINER with a fixed search_path (this schema, then pg_temp), so
-- a caller's own objects cannot stand in for the schema's. EXECUTE stays
-- with PUBLIC: only the schema's two roles have USAGE on the schema.
-- +goose StatementBegin
DO $$ BEGIN EXECUTE format('SET LOCAL search_path = %I, pg_temp', current_schema()); END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION ensure_chunk_partition(tenant text, part text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    IF tenant !~ '^[a-z0-9][a-z0-9-]{0,62}$' OR part !~ '^chunk_[a-z0-9_]{1,49}$' THEN
        RAISE EXCEPTION 'ensure_chunk_partition(%, %): not a tenant id and partition name', tenant, part
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Two instances indexing a new tenant's first document at once.
    PERFORM pg_advisory_xact_lock(hashtextextended(current_schema() || '.chunk:' || tenant, 0));
    IF to_regclass(format('%I', part)) IS NOT NULL THEN
        RETURN false;
    END IF;
    EXECUTE format('CREATE TABLE %I PARTITION OF chunk FOR VALUES IN (%L)', part, tenant);
    EXECUTE format('CREATE INDEX %I ON %I USING hnsw (embedding public.vector_cosine_ops)', part || '_hnsw', part);
    -- Policies are not inherited by partitions: a role reading the
    -- partition directly must meet the same rule as on the parent.
    EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', part);
    EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', part);
    EXECUTE format('CREATE POLICY tenant_isolation ON %I USING (tenant_id = current_setting(%L, true)) WITH CHECK (tenant_id = current_setting(%L, true))',
        part, 'app.tenant_id', 'app.tenant_id');
    RETURN true;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION ensure_chunk_partition(text, text);

// Package deploytest runs services in tests the way they run in production:
// each under its own broker user (deploy/acl) in the test's vhost and its own
// database roles (deploy/postgres) in the test's database, so permission
// regexes, topic permissions, table grants and row-level security are in
// force in every test that starts a service. A service that starts
// publishing a type its user may not publish, or a query that forgets its
// tenant, fails here as it would in production.
package deploytest

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/deploy/acl"
	"github.com/agora-platform/agora/deploy/postgres"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// Broker is the platform's broker users, provisioned in one test vhost.
type Broker struct {
	vh   *fabrictest.Vhost
	opts acl.Options
}

// NewBroker declares the platform exchanges in vh (as the administrator's
// definitions do in production: a service user may not declare them) and
// creates the broker users of services (all seven when none is named) with
// exactly their production permissions, under a per-test suffix (users are
// global to the broker). The users are deleted when the test ends. Each
// service declares its own queues, as in production.
func NewBroker(t testing.TB, vh *fabrictest.Vhost, services ...string) *Broker {
	t.Helper()
	pol, err := acl.Platform()
	if err != nil {
		t.Fatalf("deploytest: broker policy: %v", err)
	}
	if len(services) > 0 {
		var keep []acl.Grant
		for _, name := range services {
			g, ok := pol.Grant(name)
			if !ok {
				t.Fatalf("deploytest: %q is not a platform service (deploy/acl.PlatformServices)", name)
			}
			keep = append(keep, g)
		}
		pol.Grants = keep
	}
	b := &Broker{vh: vh, opts: acl.Options{Vhost: vh.Name, UserSuffix: Unique("-")}}

	// The exchanges first, as the test's administrator.
	conn := vh.Dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ch, err := conn.Channel(ctx)
	if err != nil {
		t.Fatalf("deploytest: channel: %v", err)
	}
	for _, e := range topology.PlatformExchanges() {
		if err := ch.ExchangeDeclare(e.Name, e.Type, true, false, false, false, nil); err != nil {
			t.Fatalf("deploytest: declare exchange %s: %v", e.Name, err)
		}
	}
	ch.Close()

	defs := pol.Definitions(b.opts)
	t.Cleanup(func() {
		for _, u := range defs.Users {
			_ = vh.Mgmt(http.MethodDelete, "/api/users/"+url.PathEscape(u.Name), nil, nil)
		}
	})
	if err := vh.Mgmt(http.MethodPost, "/api/definitions", defs, nil); err != nil {
		t.Fatalf("deploytest: import broker users into vhost %s (management plugin enabled? run `make infra`): %v", vh.Name, err)
	}
	return b
}

// User is service's broker user name.
func (b *Broker) User(service string) string { return b.opts.User(service) }

// URL is the AMQP URL into the test vhost as service's own user.
func (b *Broker) URL(service string) string {
	user := b.opts.User(service)
	return fmt.Sprintf("amqp://%s:%s@%s/%s", url.PathEscape(user), url.PathEscape(acl.DevPassword(user)),
		b.vh.Env.AMQPHost, url.PathEscape(b.vh.Name))
}

// Database is service schemas with their owner and service roles,
// provisioned in one test database.
type Database struct {
	base *url.URL // the database, as the superuser
	opts postgres.Options
}

// NewDatabase provisions, in the database at dbURL (connected as a
// superuser), every platform schema with its owner and service roles, as
// deploy/postgres/roles.sql does in production, under a per-test role
// suffix. The roles are dropped when the test ends, after everything they
// own in that database; register it after creating the database and before
// starting services, so services stop first and the database goes last.
func NewDatabase(t testing.TB, dbURL string) *Database {
	t.Helper()
	return provision(t, dbURL, postgres.Options{RoleSuffix: Unique("_"), Vector: true})
}

// NewSchema is NewDatabase for one throwaway schema in a database that
// other tests share: roles <schema> and <schema>_owner, no database-wide
// changes. It drops the schema and both roles when the test ends.
func NewSchema(t testing.TB, dbURL, schema string) *Database {
	t.Helper()
	return provision(t, dbURL, postgres.Options{Schemas: []string{schema}, SharedDatabase: true, Vector: true})
}

func provision(t testing.TB, dbURL string, opts postgres.Options) *Database {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("deploytest: database URL: %v", err)
	}
	d := &Database{base: u, opts: opts}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatalf("deploytest: postgres at %s (is it running? run `make infra`): %v", u.Redacted(), err)
	}
	defer admin.Close(context.Background())
	t.Cleanup(func() { d.drop(t) })
	if err := postgres.Provision(ctx, admin, opts); err != nil {
		t.Fatalf("deploytest: %v", err)
	}
	return d
}

// drop removes what the roles own in the database (their schemas with
// everything in them, default privileges, grants), then the roles.
func (d *Database) drop(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, d.base.String())
	if err != nil {
		t.Errorf("deploytest: drop roles: %v", err)
		return
	}
	defer admin.Close(context.Background())
	schemas := d.opts.Schemas
	if schemas == nil {
		schemas = postgres.Schemas()
	}
	for _, s := range schemas {
		for _, role := range []string{d.opts.Role(s), d.opts.Owner(s)} {
			r := pgx.Identifier{role}.Sanitize()
			for _, q := range []string{"DROP OWNED BY " + r + " CASCADE", "DROP ROLE " + r} {
				if _, err := admin.Exec(ctx, q); err != nil {
					t.Errorf("deploytest: %s: %v", q, err)
				}
			}
		}
	}
}

// URL is the database URL as the schema's service role, which owns nothing.
func (d *Database) URL(schema string) string { return d.as(d.opts.Role(schema)) }

// OwnerURL is the database URL as the schema's owner, for migrations.
func (d *Database) OwnerURL(schema string) string { return d.as(d.opts.Owner(schema)) }

// Role is the schema's service role.
func (d *Database) Role(schema string) string { return d.opts.Role(schema) }

func (d *Database) as(role string) string {
	u := *d.base
	u.User = url.UserPassword(role, postgres.DevPassword(role))
	return u.String()
}

// Service provisions service for an in-process test: its broker user in vh
// and schema (a throwaway name such as t_1a2b3c4d) with its two roles in
// the database at dbURL. It returns the variables the service runs with:
// AMQP_URL, DATABASE_URL, DATABASE_MIGRATE_URL and DATABASE_SCHEMA.
func Service(t testing.TB, vh *fabrictest.Vhost, dbURL, service, schema string) map[string]string {
	t.Helper()
	b := NewBroker(t, vh, service)
	d := NewSchema(t, dbURL, schema)
	return map[string]string{
		"AMQP_URL":             b.URL(service),
		"DATABASE_URL":         d.URL(schema),
		"DATABASE_MIGRATE_URL": d.OwnerURL(schema),
		"DATABASE_SCHEMA":      schema,
	}
}

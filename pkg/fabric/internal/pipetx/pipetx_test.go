package pipetx_test

import (
	"context"
	"errors"
	"net"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/internal/pipetx"
)

// countingConn counts the client's writes to the server: with pgx, one
// per round trip (a pipeline is written once, then read).
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// rig is a table in a throwaway schema and a one-connection pool whose
// round trips are counted.
type rig struct {
	pool   *pgxpool.Pool
	writes atomic.Int64
}

func newRig(t *testing.T) *rig {
	t.Helper()
	env := fabrictest.EnvFrom(os.Getenv)
	s := fabrictest.NewSchema(t, env)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.Pool.Exec(ctx, `CREATE TABLE item (id int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	r := &rig{}
	cfg, err := pgxpool.ParseConfig(env.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = s.Name
	cfg.MaxConns = 1
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	dial := cfg.ConnConfig.DialFunc
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{Conn: c, writes: &r.writes}, nil
	}
	if r.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.pool.Close)
	return r
}

func (r *rig) items(t *testing.T) []int {
	t.Helper()
	rows, err := r.pool.Query(context.Background(), `SELECT id FROM item ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestDeferredStatementsRideAlong: BEGIN and deferred writes travel with
// the next statement or the COMMIT, in order, and a transaction that sent
// nothing ends without a round trip. Each case runs twice on one
// connection and counts the second run (the first also prepares its
// statements).
func TestDeferredStatementsRideAlong(t *testing.T) {
	tests := []struct {
		name       string
		run        func(ctx context.Context, t *testing.T, tx *pipetx.Tx, base int)
		commit     bool
		roundTrips int64
		want       []int // offsets from the run's base id
	}{
		{"deferred write and commit", func(ctx context.Context, t *testing.T, tx *pipetx.Tx, base int) {
			tx.Defer(`INSERT INTO item VALUES ($1)`, base)
		}, true, 1, []int{0}},
		{"begin rides with the first statement", func(ctx context.Context, t *testing.T, tx *pipetx.Tx, base int) {
			if _, err := tx.Exec(ctx, `INSERT INTO item VALUES ($1)`, base); err != nil {
				t.Fatal(err)
			}
		}, true, 2, []int{0}},
		{"a query sees the deferred write it carries", func(ctx context.Context, t *testing.T, tx *pipetx.Tx, base int) {
			tx.Defer(`INSERT INTO item VALUES ($1)`, base)
			var n int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM item WHERE id = $1`, base).Scan(&n); err != nil || n != 1 {
				t.Fatalf("count = %d, %v; want 1", n, err)
			}
		}, true, 2, []int{0}},
		{"rows of a query carrying writes", func(ctx context.Context, t *testing.T, tx *pipetx.Tx, base int) {
			tx.Defer(`INSERT INTO item VALUES ($1)`, base)
			tx.Defer(`INSERT INTO item VALUES ($1)`, base+1)
			rows, err := tx.Query(ctx, `SELECT id - $1 FROM item WHERE id >= $1 ORDER BY id`, base)
			if err != nil {
				t.Fatal(err)
			}
			got, err := pgx.CollectRows(rows, pgx.RowTo[int])
			if err != nil || !slices.Equal(got, []int{0, 1}) {
				t.Fatalf("rows = %v, %v", got, err)
			}
		}, true, 2, []int{0, 1}},
		{"a batch after deferred writes gets its own results", func(ctx context.Context, t *testing.T, tx *pipetx.Tx, base int) {
			tx.Defer(`INSERT INTO item VALUES ($1)`, base)
			b := &pgx.Batch{}
			b.Queue(`INSERT INTO item VALUES ($1)`, base+1)
			b.Queue(`SELECT count(*) FROM item WHERE id >= $1`, base)
			br := tx.SendBatch(ctx, b)
			if tag, err := br.Exec(); err != nil || tag.RowsAffected() != 1 {
				t.Fatalf("batch insert: %v, %v", tag, err)
			}
			var n int
			if err := br.QueryRow().Scan(&n); err != nil || n != 2 {
				t.Fatalf("batch count = %d, %v; want 2", n, err)
			}
			if err := br.Close(); err != nil {
				t.Fatal(err)
			}
		}, true, 2, []int{0, 1}},
		{"rollback of a transaction that sent nothing is free", func(ctx context.Context, t *testing.T, tx *pipetx.Tx, base int) {
			tx.Defer(`INSERT INTO item VALUES ($1)`, base)
		}, false, 0, nil},
		{"rollback after a statement", func(ctx context.Context, t *testing.T, tx *pipetx.Tx, base int) {
			if _, err := tx.Exec(ctx, `INSERT INTO item VALUES ($1)`, base); err != nil {
				t.Fatal(err)
			}
			tx.Defer(`INSERT INTO item VALUES ($1)`, base+1)
		}, false, 2, nil},
		{"a savepoint rolled back takes its deferred writes with it", func(ctx context.Context, t *testing.T, tx *pipetx.Tx, base int) {
			tx.Defer(`INSERT INTO item VALUES ($1)`, base)
			sp, err := tx.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			sp.(*pipetx.Tx).Defer(`INSERT INTO item VALUES ($1)`, base+1)
			if err := sp.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			sp, _ = tx.Begin(ctx)
			sp.(*pipetx.Tx).Defer(`INSERT INTO item VALUES ($1)`, base+2)
			if err := sp.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}, true, 1, []int{0, 2}},
		{"a savepoint rolled back after it reached the server", func(ctx context.Context, t *testing.T, tx *pipetx.Tx, base int) {
			if _, err := tx.Exec(ctx, `INSERT INTO item VALUES ($1)`, base); err != nil {
				t.Fatal(err)
			}
			sp, _ := tx.Begin(ctx)
			if _, err := sp.Exec(ctx, `INSERT INTO item VALUES ($1)`, base+1); err != nil {
				t.Fatal(err)
			}
			sp.(*pipetx.Tx).Defer(`INSERT INTO item VALUES ($1)`, base+3)
			if err := sp.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			tx.Defer(`INSERT INTO item VALUES ($1)`, base+2)
		}, true, 4, []int{0, 2}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			ctx := context.Background()
			var counted int64
			for run := range 2 {
				base := (i*10+run)*100 + 1
				before := r.writes.Load()
				tx, err := pipetx.Begin(ctx, r.pool)
				if err != nil {
					t.Fatal(err)
				}
				tc.run(ctx, t, tx, base)
				if tc.commit {
					err = tx.Commit(ctx)
				} else {
					err = tx.Rollback(ctx)
				}
				if err != nil {
					t.Fatal(err)
				}
				// Its connection is back in the pool: nothing may reach it.
				if err := tx.Rollback(ctx); !errors.Is(err, pgx.ErrTxClosed) {
					t.Fatalf("rollback after end = %v, want ErrTxClosed", err)
				}
				if err := tx.Defer(`INSERT INTO item VALUES (0)`); !errors.Is(err, pgx.ErrTxClosed) {
					t.Fatalf("defer after end = %v, want ErrTxClosed", err)
				}
				if _, err := tx.Exec(ctx, `INSERT INTO item VALUES (0)`); !errors.Is(err, pgx.ErrTxClosed) {
					t.Fatalf("exec after end = %v, want ErrTxClosed", err)
				}
				counted = r.writes.Load() - before
				var want []int
				for _, off := range tc.want {
					want = append(want, base+off)
				}
				if got := r.items(t); !slices.Equal(got, want) {
					t.Fatalf("run %d: rows %v, want %v", run, got, want)
				}
				if _, err := r.pool.Exec(ctx, `DELETE FROM item`); err != nil {
					t.Fatal(err)
				}
			}
			if counted != tc.roundTrips {
				t.Fatalf("round trips = %d, want %d", counted, tc.roundTrips)
			}
		})
	}
}

// TestDeferredWriteErrorsSurface: a deferred write that fails is reported
// by the statement it travelled with, or by Commit, with its PgError; the
// transaction commits nothing, and the connection serves the next one.
func TestDeferredWriteErrorsSurface(t *testing.T) {
	tests := []struct {
		name string
		end  func(ctx context.Context, tx *pipetx.Tx) error
	}{
		{"at the next statement", func(ctx context.Context, tx *pipetx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO item VALUES (3)`)
			if err == nil {
				return errors.New("no error")
			}
			if cerr := tx.Commit(ctx); !errors.Is(cerr, pgx.ErrTxCommitRollback) {
				return errors.New("commit after the failure: " + errString(cerr))
			}
			return err
		}},
		{"at a query", func(ctx context.Context, tx *pipetx.Tx) error {
			var n int
			err := tx.QueryRow(ctx, `SELECT 1`).Scan(&n)
			tx.Rollback(ctx)
			return err
		}},
		{"at flush", func(ctx context.Context, tx *pipetx.Tx) error {
			err := tx.Flush(ctx)
			tx.Rollback(ctx)
			return err
		}},
		{"at commit", func(ctx context.Context, tx *pipetx.Tx) error { return tx.Commit(ctx) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			ctx := context.Background()
			if _, err := r.pool.Exec(ctx, `INSERT INTO item VALUES (1)`); err != nil {
				t.Fatal(err)
			}
			tx, err := pipetx.Begin(ctx, r.pool)
			if err != nil {
				t.Fatal(err)
			}
			tx.Defer(`INSERT INTO item VALUES (2)`)
			tx.Defer(`INSERT INTO item VALUES (1)`) // taken
			err = tc.end(ctx, tx)
			var pgErr *pgconn.PgError
			var deferred *pipetx.DeferredError
			if !errors.As(err, &pgErr) || pgErr.Code != "23505" || !errors.As(err, &deferred) || !strings.Contains(err.Error(), "deferred INSERT INTO item") {
				t.Fatalf("error = %v, want the deferred insert's unique violation", err)
			}
			if got := r.items(t); !slices.Equal(got, []int{1}) {
				t.Fatalf("rows %v, want only the earlier [1]", got)
			}
			tx, err = pipetx.Begin(ctx, r.pool)
			if err != nil {
				t.Fatal(err)
			}
			tx.Defer(`INSERT INTO item VALUES (4)`)
			if err := tx.Commit(ctx); err != nil {
				t.Fatalf("next transaction on the connection: %v", err)
			}
			if got := r.items(t); !slices.Equal(got, []int{1, 4}) {
				t.Fatalf("rows %v, want [1 4]", got)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

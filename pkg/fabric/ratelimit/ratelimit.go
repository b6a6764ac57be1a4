// Package ratelimit paces work without dropping it (seed 004 §82, seed
// 003's paced enrichment consumer): a consumer with ConsumerOptions.Pace
// waits for a token before each handler call, so messages wait in the
// queue (and in the prefetch window) instead of being refused.
//
// local limits one process (golang.org/x/time/rate). Shared limits every
// instance together: a token bucket in a row of <schema>.rate_bucket
// (fabric migration 00011), from which each instance leases a small chunk
// of tokens at a time (a tenth of a second's worth), so the database sees
// one update per chunk, not one per message. The bucket's clock is the
// database's, so instances with skewed clocks share one rate.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/time/rate"
)

// local is a token bucket in this process.
type local struct{ l *rate.Limiter }

// NewLocal allows perSecond on average with bursts of burst (at least 1).
func NewLocal(perSecond float64, burst int) *local {
	return &local{l: rate.NewLimiter(rate.Limit(perSecond), max(burst, 1))}
}

// Wait blocks until a token is available or ctx ends.
func (l *local) Wait(ctx context.Context) error { return l.l.Wait(ctx) }

// shared is a token bucket every instance of a service draws from.
type shared struct {
	pool      *pgxpool.Pool
	table     string
	name      string
	perSecond float64
	burst     float64
	lease     int

	mu     sync.Mutex
	tokens int // leased and not yet used
}

// newShared returns the bucket name in schema's rate_bucket: perSecond on
// average across all instances, bursts of burst (at least 1).
func newShared(pool *pgxpool.Pool, schema, name string, perSecond float64, burst int) (*shared, error) {
	if perSecond <= 0 || name == "" {
		return nil, fmt.Errorf("ratelimit: bucket %q: want a name and a positive rate", name)
	}
	burst = max(burst, 1)
	// A tenth of a second's worth per lease, never more than the burst:
	// what one instance may hold unused is bounded by it.
	lease := max(1, min(burst, int(perSecond/10)))
	return &shared{pool: pool, table: pgx.Identifier{schema, "rate_bucket"}.Sanitize(), name: name,
		perSecond: perSecond, burst: float64(burst), lease: lease}, nil
}

// Wait blocks until a token is available or ctx ends. Tokens are leased in
// chunks; between leases Wait takes from the chunk without a round trip.
func (s *shared) Wait(ctx context.Context) error {
	for {
		s.mu.Lock()
		if s.tokens > 0 {
			s.tokens--
			s.mu.Unlock()
			return nil
		}
		granted, wait, err := s.take(ctx)
		if err == nil && granted > 0 {
			s.tokens = granted - 1
			s.mu.Unlock()
			return nil
		}
		s.mu.Unlock()
		if err != nil {
			// A database hiccup: wait a little rather than run unpaced.
			wait = 100 * time.Millisecond
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Allow takes a token if one is available now, without waiting: false
// says how long until one should be (for a Retry-After).
func (s *shared) Allow(ctx context.Context) (bool, time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tokens > 0 {
		s.tokens--
		return true, 0, nil
	}
	granted, wait, err := s.take(ctx)
	if err != nil {
		return false, 0, err
	}
	if granted == 0 {
		if wait == 0 { // the bucket was just created: full from now on
			if granted, _, err = s.take(ctx); err != nil {
				return false, 0, err
			}
		}
		if granted == 0 {
			return false, max(wait, 5*time.Millisecond), nil
		}
	}
	s.tokens = granted - 1
	return true, 0, nil
}

// perKey is one Shared bucket per key (a tenant): the same rate for each
// unless overridden, every bucket shared by all instances.
type perKey struct {
	pool      *pgxpool.Pool
	schema    string
	prefix    string
	perSecond float64
	burst     int
	overrides map[string]float64

	mu      sync.Mutex
	buckets map[string]*shared
}

// NewPerKey returns buckets named prefix+key in schema's rate_bucket:
// perSecond (bursts of burst) per key, or overrides[key] where set.
func NewPerKey(pool *pgxpool.Pool, schema, prefix string, perSecond float64, burst int, overrides map[string]float64) (*perKey, error) {
	if perSecond <= 0 {
		return nil, fmt.Errorf("ratelimit: %s: want a positive rate", prefix)
	}
	for k, v := range overrides {
		if v <= 0 {
			return nil, fmt.Errorf("ratelimit: %s: rate of %s: want a positive rate", prefix, k)
		}
	}
	return &perKey{pool: pool, schema: schema, prefix: prefix, perSecond: perSecond, burst: burst, overrides: overrides,
		buckets: map[string]*shared{}}, nil
}

// Allow takes a token from key's bucket if one is available now.
func (p *perKey) Allow(ctx context.Context, key string) (bool, time.Duration, error) {
	p.mu.Lock()
	b, ok := p.buckets[key]
	if !ok {
		rate, burst := p.perSecond, p.burst
		if r, ok := p.overrides[key]; ok {
			// The burst scales with an overridden rate.
			burst = max(1, int(float64(burst)*r/p.perSecond))
			rate = r
		}
		var err error
		if b, err = newShared(p.pool, p.schema, p.prefix+key, rate, burst); err != nil {
			p.mu.Unlock()
			return false, 0, err
		}
		p.buckets[key] = b
	}
	p.mu.Unlock()
	return b.Allow(ctx)
}

// take leases up to s.lease tokens from the bucket, refilled for the time
// since its last update; with none available it says how long until one
// is.
func (s *shared) take(ctx context.Context) (granted int, wait time.Duration, err error) {
	var avail float64
	err = s.pool.QueryRow(ctx, `WITH seed AS (
			INSERT INTO `+s.table+` (name, tokens, updated_at) VALUES ($1, $3, clock_timestamp())
			ON CONFLICT (name) DO NOTHING
		), b AS (
			SELECT least($3, tokens + $2 * extract(epoch FROM clock_timestamp() - updated_at)) AS avail
			FROM `+s.table+` WHERE name = $1 FOR UPDATE
		)
		UPDATE `+s.table+` r SET tokens = b.avail - least($4, floor(b.avail)), updated_at = clock_timestamp()
		FROM b WHERE r.name = $1
		RETURNING b.avail`, s.name, s.perSecond, s.burst, s.lease).Scan(&avail)
	if errors.Is(err, pgx.ErrNoRows) {
		// The bucket was created by this very statement (its row is not
		// visible to the UPDATE yet): the next call finds it full.
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("ratelimit: bucket %s: %w", s.name, err)
	}
	granted = int(math.Min(float64(s.lease), math.Floor(avail)))
	if granted > 0 {
		return granted, 0, nil
	}
	wait = time.Duration((1 - avail) / s.perSecond * float64(time.Second))
	return 0, max(wait, 5*time.Millisecond), nil
}

// ParseRates reads "key=rate,key=rate" (rates per second, positive), the
// form of every per-key rate setting.
func ParseRates(s string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, part := range strings.Split(s, ",") {
		key, rate, ok := strings.Cut(strings.TrimSpace(part), "=")
		r, err := strconv.ParseFloat(rate, 64)
		if !ok || key == "" || err != nil || r <= 0 || math.IsInf(r, 0) || math.IsNaN(r) {
			return nil, fmt.Errorf("%q is not key=rate per second (a positive number)", part)
		}
		out[key] = r
	}
	return out, nil
}

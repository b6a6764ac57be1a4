// Package auth verifies the platform's bearer tokens (JWT with claims sub,
// tenant_id, roles) against a JWKS with pinned algorithms, and mints
// local-development tokens.
package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/internal/security"
	"github.com/agora-platform/agora/pkg/fabric/problem"
)

// Roles.
const (
	RoleCitizen   = "citizen"
	RoleAttendant = "attendant"
	RoleOperator  = "operator"
	// RoleReplayAdmin is the elevated role a PRODUCTION replay from
	// history needs on top of the operator's (seed 004 §41).
	RoleReplayAdmin = "replay-admin"
)

// audience is the platform API audience every token must carry.
const audience = "agora-api"

// Claims are what a verified token says about its bearer.
type Claims struct {
	Subject  string
	TenantID string
	Roles    []string
}

// Has reports whether the bearer has role.
func (c Claims) Has(role string) bool { return slices.Contains(c.Roles, role) }

// Errors from Verify.
var (
	errNoToken      = errors.New("no bearer token")
	errInvalidToken = errors.New("invalid token")
)

// Verifier checks tokens. It is safe for concurrent use.
type Verifier struct {
	keys   jwk.Set
	issuer string
	now    func() time.Time

	mu       sync.Mutex
	verified map[string]verified // token → its claims, see Verify
}

// verified is a token that passed every check, and until when its claims
// may be served without checking it again.
type verified struct {
	claims Claims
	until  time.Time
}

// A portal's citizen sends the same token with every request of a session:
// checking its signature and claims again each time was an eighth of the
// request service's CPU at 100 requests/s. Verified tokens are remembered
// for at most verifiedFor and never past their exp, at most verifiedMax
// of them.
const (
	verifiedFor = time.Minute
	verifiedMax = 4096
)

// LoadKeys reads a JWKS from a file path or an http(s) URL. Every key must
// name its algorithm ("alg"): the token header is never trusted to choose.
func LoadKeys(ctx context.Context, src string) (jwk.Set, error) {
	var set jwk.Set
	var err error
	if strings.HasPrefix(src, "http://") || strings.HasPrefix(src, "https://") {
		set, err = jwk.Fetch(ctx, src)
	} else {
		set, err = jwk.ReadFile(src)
	}
	if err != nil {
		return nil, fmt.Errorf("auth: load JWKS %s: %w", src, err)
	}
	for i := 0; i < set.Len(); i++ {
		k, _ := set.Key(i)
		if _, ok := k.Algorithm(); !ok {
			return nil, fmt.Errorf("auth: JWKS %s: key %d has no \"alg\"", src, i)
		}
	}
	return set, nil
}

// NewVerifier verifies tokens signed by keys and issued by issuer for the
// platform audience.
func NewVerifier(keys jwk.Set, issuer string) *Verifier {
	return &Verifier{keys: keys, issuer: issuer, now: time.Now, verified: map[string]verified{}}
}

// Verify parses and validates a compact JWT: signature (algorithm from the
// key), issuer, audience, expiry (1 min skew) and the platform claims.
//
// A token that passed is remembered (by its exact bytes) for a minute at
// most and never past its exp, so the same token again costs a map lookup.
// Failures are not remembered.
func (v *Verifier) Verify(token string) (Claims, error) {
	now := v.now()
	v.mu.Lock()
	e, ok := v.verified[token]
	v.mu.Unlock()
	if ok && now.Before(e.until) {
		return e.claims, nil
	}
	c, exp, err := v.verify(token, now)
	if err != nil {
		return Claims{}, err
	}
	until := now.Add(verifiedFor)
	if exp.Before(until) {
		until = exp
	}
	v.mu.Lock()
	if len(v.verified) >= verifiedMax {
		for k := range v.verified { // an arbitrary one: map order is random
			delete(v.verified, k)
			break
		}
	}
	v.verified[token] = verified{claims: c, until: until}
	v.mu.Unlock()
	return c, nil
}

// verify checks token at now and returns its claims and exp.
func (v *Verifier) verify(token string, now time.Time) (Claims, time.Time, error) {
	tok, err := jwt.Parse([]byte(token), jwt.WithKeySet(v.keys), jwt.WithValidate(true),
		jwt.WithIssuer(v.issuer), jwt.WithAudience(audience), jwt.WithAcceptableSkew(time.Minute),
		jwt.WithClock(jwt.ClockFunc(func() time.Time { return now })))
	if err != nil {
		return Claims{}, time.Time{}, fmt.Errorf("%w: %v", errInvalidToken, err)
	}
	exp, ok := tok.Expiration()
	if !ok {
		return Claims{}, time.Time{}, fmt.Errorf("%w: no exp", errInvalidToken)
	}
	var c Claims
	c.Subject, _ = tok.Subject()
	if err := tok.Get("tenant_id", &c.TenantID); err != nil {
		return Claims{}, time.Time{}, fmt.Errorf("%w: tenant_id: %v", errInvalidToken, err)
	}
	var roles []any
	if err := tok.Get("roles", &roles); err != nil {
		return Claims{}, time.Time{}, fmt.Errorf("%w: roles: %v", errInvalidToken, err)
	}
	for _, r := range roles {
		if s, ok := r.(string); ok {
			c.Roles = append(c.Roles, s)
		}
	}
	if c.Subject == "" || !envelope.ValidTenant(c.TenantID) || len(c.Roles) == 0 {
		return Claims{}, time.Time{}, fmt.Errorf("%w: sub, a valid tenant_id and roles are required", errInvalidToken)
	}
	return c, exp, nil
}

type ctxKey struct{}

// withClaims returns ctx carrying c.
func withClaims(ctx context.Context, c Claims) context.Context {
	return context.WithValue(ctx, ctxKey{}, c)
}

// FromContext returns the verified claims of the request.
func FromContext(ctx context.Context) (Claims, bool) {
	c, ok := ctx.Value(ctxKey{}).(Claims)
	return c, ok
}

// Require returns middleware that admits requests with a valid bearer token
// holding at least one of roles (any role when none are given). Failures
// answer 401 or 403 with a problem body; a 403 is reported as a refused
// capability, "role:" and the roles (the host counts it, package
// internal/security).
func (v *Verifier) Require(roles ...string) func(http.Handler) http.Handler {
	capability := "role:" + strings.Join(roles, "|")
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h := r.Header.Get("Authorization")
			token, ok := strings.CutPrefix(h, "Bearer ")
			if !ok || token == "" {
				w.Header().Set("WWW-Authenticate", `Bearer realm="agora"`)
				problem.Error(w, r, http.StatusUnauthorized, "a bearer token is required")
				return
			}
			c, err := v.Verify(token)
			if err != nil {
				w.Header().Set("WWW-Authenticate", `Bearer realm="agora", error="invalid_token"`)
				problem.Error(w, r, http.StatusUnauthorized, err.Error())
				return
			}
			if len(roles) > 0 && !slices.ContainsFunc(roles, c.Has) {
				security.CapabilityRefused(r.Context(), capability)
				problem.Error(w, r, http.StatusForbidden, fmt.Sprintf("requires one of the roles %v", roles))
				return
			}
			ctx := withClaims(r.Context(), c)
			if c.Subject != "" {
				// What the request enqueues was done by this person.
				ctx = envelope.WithActor(ctx, envelope.Ref{Type: "USER", ID: c.Subject})
			}
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}

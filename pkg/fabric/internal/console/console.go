// Package console is the operator console: a few server-rendered pages over
// what every service already serves to an operator (its operations views,
// package ops, and its DLQ API, package dlq). It holds no data and no
// privilege of its own: the operator logs in with a platform JWT, the
// console keeps it in an HttpOnly cookie and forwards it as the bearer of
// every call, so each service checks the role and confines the answer to
// the token's tenant exactly as it does for any client. A host serves it
// under Path when CONSOLE_SERVICES names the services to ask.
package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/internal/security"
)

// Path is where a host mounts the console.
const Path = "/console/"

// Cookie names: the operator's token, and the double-submit CSRF token
// every form carries (it holds across replicas, unlike a per-process key).
const (
	sessionCookie = "agora_console"
	csrfCookie    = "agora_console_csrf"
)

// Target is one service the console asks.
type Target struct {
	Name string
	URL  string // base URL, e.g. http://workflow:8082
}

// ParseTargets reads CONSOLE_SERVICES: "name=url,name=url".
func ParseTargets(s string) ([]Target, error) {
	var out []Target
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, raw, ok := strings.Cut(part, "=")
		name = strings.TrimSpace(name)
		u, err := url.Parse(strings.TrimSpace(raw))
		if !ok || name == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("CONSOLE_SERVICES: %q is not name=http(s)://host:port", part)
		}
		if slices.ContainsFunc(out, func(t Target) bool { return t.Name == name }) {
			return nil, fmt.Errorf("CONSOLE_SERVICES: %q named twice", name)
		}
		out = append(out, Target{Name: name, URL: strings.TrimRight(u.String(), "/")})
	}
	if len(out) == 0 {
		return nil, errors.New("CONSOLE_SERVICES: no service named")
	}
	return out, nil
}

// Verifier checks a token (auth.Verifier does).
type Verifier interface {
	Verify(token string) (auth.Claims, error)
}

// Options are the console's dependencies.
type Options struct {
	Targets  []Target
	Verifier Verifier
	Client   *http.Client // nil: a client with a 30 s timeout
	Log      *slog.Logger
	// SecureCookies marks the cookies Secure: set it when the console is
	// reached over HTTPS (behind a TLS-terminating proxy, say).
	SecureCookies bool
}

//go:embed templates/*.html
var templateFS embed.FS

type console struct {
	Options
	pages map[string]*template.Template
}

// Handler returns the console, to mount at Path.
func Handler(o Options) (http.Handler, error) {
	if len(o.Targets) == 0 || o.Verifier == nil {
		return nil, errors.New("console: targets and a verifier are required")
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: 30 * time.Second}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	c := &console{Options: o, pages: map[string]*template.Template{}}
	funcs := template.FuncMap{"age": age, "join": strings.Join}
	for _, page := range []string{"login", "overview", "dlq", "letter", "action", "journey"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+page+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", page, err)
		}
		c.pages[page] = t
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Path+"login", c.loginForm)
	mux.HandleFunc("POST "+Path+"login", c.login)
	mux.HandleFunc("POST "+Path+"logout", c.session(c.logout))
	mux.HandleFunc("GET "+Path+"{$}", c.session(c.overview))
	mux.HandleFunc("GET "+Path+"dlq/{service}/{queue}", c.session(c.deadLetters))
	mux.HandleFunc("GET "+Path+"dlq/{service}/{queue}/letters/{id}", c.session(c.letter))
	mux.HandleFunc("POST "+Path+"dlq/{service}/{queue}", c.session(c.act))
	mux.HandleFunc("GET "+Path+"journey", c.session(c.journey))
	return securityHeaders(mux), nil
}

// securityHeaders keeps the pages out of frames and off shared caches, and
// lets them load nothing but themselves (no script runs at all).
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self' 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-store")
		h.Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}

// operator is the logged-in operator of a request.
type operator struct {
	claims auth.Claims
	token  string
	csrf   string
}

// session admits a request with a valid operator token in its cookie; any
// other goes to the login page (a form post without the CSRF token, 403).
func (c *console) session(next func(http.ResponseWriter, *http.Request, operator)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ck, err := r.Cookie(sessionCookie)
		if err != nil {
			http.Redirect(w, r, Path+"login", http.StatusSeeOther)
			return
		}
		claims, err := c.Verifier.Verify(ck.Value)
		if err != nil || !claims.Has(auth.RoleOperator) || claims.TenantID == "" {
			c.clearCookies(w)
			http.Redirect(w, r, Path+"login?expired=1", http.StatusSeeOther)
			return
		}
		op := operator{claims: claims, token: ck.Value}
		if cc, err := r.Cookie(csrfCookie); err == nil {
			op.csrf = cc.Value
		}
		if r.Method == http.MethodPost {
			if op.csrf == "" || subtle.ConstantTimeCompare([]byte(op.csrf), []byte(r.PostFormValue("csrf"))) != 1 {
				c.render(w, http.StatusForbidden, "login", map[string]any{"Error": "The form expired or did not come from this console; log in again."})
				return
			}
		}
		next(w, r, op)
	}
}

func (c *console) loginForm(w http.ResponseWriter, r *http.Request) {
	data := map[string]any{}
	if r.URL.Query().Get("expired") != "" {
		data["Error"] = "Your session ended (the token expired or is no longer valid): log in again."
	}
	c.render(w, http.StatusOK, "login", data)
}

func (c *console) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	token := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(r.PostFormValue("token")), "Bearer "))
	claims, err := c.Verifier.Verify(token)
	switch {
	case token == "":
		c.render(w, http.StatusBadRequest, "login", map[string]any{"Error": "Paste your operator token."})
		return
	case err != nil:
		security.Presented(r.Context(), token)
		c.render(w, http.StatusUnauthorized, "login", map[string]any{"Error": "The token was refused: " + err.Error()})
		return
	case !claims.Has(auth.RoleOperator) || claims.TenantID == "":
		security.Presented(r.Context(), token)
		security.CapabilityRefused(r.Context(), "role:"+auth.RoleOperator)
		c.render(w, http.StatusForbidden, "login", map[string]any{"Error": "The console is for operators of a tenant; this token has neither the operator role or no tenant."})
		return
	}
	csrf := make([]byte, 16)
	_, _ = rand.Read(csrf)
	// Session cookies: the token's own expiry ends the session sooner,
	// since every page verifies it again.
	c.setCookie(w, sessionCookie, token)
	c.setCookie(w, csrfCookie, hex.EncodeToString(csrf))
	c.Log.Info("console: operator logged in", "subject", claims.Subject, "tenant", claims.TenantID)
	http.Redirect(w, r, Path, http.StatusSeeOther)
}

func (c *console) logout(w http.ResponseWriter, r *http.Request, _ operator) {
	c.clearCookies(w)
	http.Redirect(w, r, Path+"login", http.StatusSeeOther)
}

func (c *console) setCookie(w http.ResponseWriter, name, value string) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: Path, HttpOnly: true, Secure: c.SecureCookies, SameSite: http.SameSiteStrictMode})
}

func (c *console) clearCookies(w http.ResponseWriter) {
	for _, name := range []string{sessionCookie, csrfCookie} {
		http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: Path, MaxAge: -1, HttpOnly: true, Secure: c.SecureCookies, SameSite: http.SameSiteStrictMode})
	}
}

// render writes page with data, adding the operator when there is one.
func (c *console) render(w http.ResponseWriter, status int, page string, data map[string]any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := c.pages[page].Execute(w, data); err != nil {
		c.Log.Error("console: render", "page", page, "err", err)
	}
}

func (c *console) target(name string) (Target, bool) {
	i := slices.IndexFunc(c.Targets, func(t Target) bool { return t.Name == name })
	if i < 0 {
		return Target{}, false
	}
	return c.Targets[i], true
}

// eachTarget calls fn for every target concurrently and waits.
func (c *console) eachTarget(fn func(i int, t Target)) {
	var wg sync.WaitGroup
	for i, t := range c.Targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(i, t)
		}()
	}
	wg.Wait()
}

// page is the data every page shares.
func (op operator) page(title string) map[string]any {
	return map[string]any{"Title": title, "Operator": op.claims.Subject, "Tenant": op.claims.TenantID, "CSRF": op.csrf}
}

// age writes seconds as a short duration ("3m12s"); "" for nil.
func age(secs *float64) string {
	if secs == nil {
		return ""
	}
	return time.Duration(*secs * float64(time.Second)).Round(time.Second).String()
}

// ctxOf bounds the calls one page makes.
func ctxOf(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), 20*time.Second)
}

// Command communication sends citizens their notifications: the
// confirmation of every submitted request (e-mail over SMTP, or the
// citizen's preferred channel: SMS and WhatsApp through HTTP gateways) and
// whatever communication.send.v1 commands ask for. See README.md.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	// Quiet hours are kept in the citizen's zone; the slim runtime image
	// has no zoneinfo of its own.
	_ "time/tzdata"

	"github.com/agora-platform/agora/pkg/fabric/host"
	"github.com/agora-platform/agora/services/communication/internal/gateway"
	"github.com/agora-platform/agora/services/communication/internal/httpapi"
	"github.com/agora-platform/agora/services/communication/internal/logchannel"
	"github.com/agora-platform/agora/services/communication/internal/mail"
	"github.com/agora-platform/agora/services/communication/internal/messaging"
	"github.com/agora-platform/agora/services/communication/internal/notify"
	"github.com/agora-platform/agora/services/communication/internal/postgres"
	"github.com/agora-platform/agora/services/communication/migrations"
)

func main() { host.Main("communication", run) }

type config struct {
	host        host.Config
	smtp        mail.Config
	concurrency int
	// heldInterval is how often notifications held for quiet hours are
	// looked at (HELD_CHECK_INTERVAL).
	heldInterval time.Duration
	// coalesceWindow is how long a request's status notices wait so that
	// the ones within it reach the citizen as one (NOTICE_COALESCE_WINDOW;
	// 0 sends each at once).
	coalesceWindow time.Duration
	// gateways are the SMS and WhatsApp gateways configured
	// (SMS_GATEWAY_URL, WHATSAPP_GATEWAY_URL, GATEWAY_TIMEOUT); a channel
	// without one has the logging stand-in.
	gateways map[notify.Channel]gateway.Config
}

// defaultCoalesceWindow covers the usual gap between a submission and the
// workflow's move to in progress (about a second), so the citizen gets one
// mail for both, at the cost of a confirmation three seconds later.
const defaultCoalesceWindow = 3 * time.Second

// maxCoalesceWindow bounds the window: a notice is a notice of something
// that happened, and one held for longer is late news.
const maxCoalesceWindow = 10 * time.Minute

func loadConfig(getenv func(string) string) (config, error) {
	hc, err := host.ConfigFrom("communication", ":8083", getenv)
	if err != nil {
		return config{}, err
	}
	c := config{host: hc, smtp: mail.Config{
		Addr:     getenv("SMTP_ADDR"),
		From:     getenv("SMTP_FROM"),
		HeloName: getenv("SMTP_HELO"),
		Username: getenv("SMTP_USERNAME"),
		Password: getenv("SMTP_PASSWORD"),
	}, concurrency: 4, heldInterval: 30 * time.Second, coalesceWindow: defaultCoalesceWindow}
	if c.smtp.Addr == "" {
		c.smtp.Addr = "127.0.0.1:1025"
	}
	if c.smtp.From == "" {
		c.smtp.From = "no-reply@agora.local"
	}
	if v := getenv("SMTP_STARTTLS"); v != "" {
		if c.smtp.StartTLS, err = strconv.ParseBool(v); err != nil {
			return c, fmt.Errorf("SMTP_STARTTLS: %w", err)
		}
	}
	if v := getenv("HELD_CHECK_INTERVAL"); v != "" {
		if c.heldInterval, err = time.ParseDuration(v); err != nil || c.heldInterval <= 0 {
			return c, fmt.Errorf("HELD_CHECK_INTERVAL %q: want a positive duration like 30s", v)
		}
	}
	if v := getenv("NOTICE_COALESCE_WINDOW"); v != "" {
		if c.coalesceWindow, err = time.ParseDuration(v); err != nil || c.coalesceWindow < 0 || c.coalesceWindow > maxCoalesceWindow {
			return c, fmt.Errorf("NOTICE_COALESCE_WINDOW %q: want a duration from 0 (off) to %v, like 3s", v, maxCoalesceWindow)
		}
	}
	if v := getenv("COMMUNICATION_HANDLERS"); v != "" {
		if c.concurrency, err = strconv.Atoi(v); err != nil || c.concurrency < 1 || c.concurrency > 64 {
			return c, fmt.Errorf("COMMUNICATION_HANDLERS %q: want handlers per queue, 1 to 64", v)
		}
	}
	if v := getenv("SMTP_TIMEOUT"); v != "" {
		if c.smtp.Timeout, err = time.ParseDuration(v); err != nil {
			return c, fmt.Errorf("SMTP_TIMEOUT: %w", err)
		}
	}
	c.gateways, err = loadGateways(getenv)
	return c, err
}

// loadGateways reads the gateway of each channel that has one. A malformed
// URL or timeout stops the service at start rather than failing every
// message.
func loadGateways(getenv func(string) string) (map[notify.Channel]gateway.Config, error) {
	timeout := gateway.DefaultTimeout
	if v := getenv("GATEWAY_TIMEOUT"); v != "" {
		var err error
		if timeout, err = time.ParseDuration(v); err != nil || timeout <= 0 {
			return nil, fmt.Errorf("GATEWAY_TIMEOUT %q: want a positive duration like 10s", v)
		}
	}
	out := map[notify.Channel]gateway.Config{}
	for ch, prefix := range map[notify.Channel]string{notify.SMS: "SMS", notify.WhatsApp: "WHATSAPP"} {
		u := getenv(prefix + "_GATEWAY_URL")
		if u == "" {
			continue
		}
		gc := gateway.Config{URL: u, Token: getenv(prefix + "_GATEWAY_TOKEN"), Timeout: timeout}
		if _, err := gateway.New(ch, gc); err != nil {
			return nil, fmt.Errorf("%s_GATEWAY_URL: %w", prefix, err)
		}
		out[ch] = gc
	}
	return out, nil
}

// senders returns each channel's adapter: the mailer for e-mail, and for
// SMS and WhatsApp their gateway, or without one the stand-in that logs, so
// a local run or compose works without a provider.
func senders(cfg config, mailer *mail.Sender, log *slog.Logger) (map[notify.Channel]messaging.Sender, error) {
	out := map[notify.Channel]messaging.Sender{notify.Email: mailer}
	for _, ch := range []notify.Channel{notify.SMS, notify.WhatsApp} {
		gc, ok := cfg.gateways[ch]
		if !ok {
			log.Warn("no gateway for the channel: its messages are logged, not sent", "channel", ch)
			out[ch] = logchannel.New(ch, log)
			continue
		}
		g, err := gateway.New(ch, gc)
		if err != nil {
			return nil, err
		}
		out[ch] = g
	}
	return out, nil
}

// run starts the service and blocks until ctx ends; it returns nil after a
// graceful shutdown, or the error that stopped it.
func run(ctx context.Context, _ []string, getenv func(string) string, stdout io.Writer) error {
	return serve(ctx, getenv, stdout, nil)
}

// serve is run with a crash test's fault hook (crash_test.go; nil
// otherwise), which may end the process at messaging's fault points.
func serve(ctx context.Context, getenv func(string) string, stdout io.Writer, faults interface{ Hit(point string) }) error {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	h, err := host.New(ctx, cfg.host, host.Options{Migrations: migrations.FS(), NeedsAuth: true, Relay: true, OpenAPI: httpapi.OpenAPI}, stdout)
	if err != nil {
		return err
	}
	defer h.Close() // Serve closes it too; Close is idempotent
	store := postgres.New(h.Pool, h.Outbox)
	// The mailer keeps SMTP conversations open between messages; they end
	// when the service does.
	mailer := mail.New(cfg.smtp)
	defer mailer.Close()
	adapters, err := senders(cfg, mailer, h.Log)
	if err != nil {
		return err
	}
	if err := messaging.Attach(h, messaging.Deps{
		Store: store, Senders: adapters,
		Concurrency: cfg.concurrency, HeldInterval: cfg.heldInterval, CoalesceWindow: cfg.coalesceWindow, Log: h.Log,
		Faults: faults,
	}); err != nil {
		return err
	}
	return h.Serve(ctx, httpapi.NewHandler(httpapi.Deps{Auth: h.Verifier, Store: store, Log: h.Log}), nil)
}

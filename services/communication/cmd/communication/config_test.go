package main

import (
	"strings"
	"testing"
	"time"

	"github.com/agora-platform/agora/services/communication/internal/notify"
)

func TestLoadConfig(t *testing.T) {
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	c, err := loadConfig(env(nil))
	if err != nil || c.concurrency != 4 || c.smtp.Addr != "127.0.0.1:1025" {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
	if c.coalesceWindow != 3*time.Second {
		t.Errorf("default NOTICE_COALESCE_WINDOW = %v, want 3s", c.coalesceWindow)
	}
	if len(c.gateways) != 0 {
		t.Errorf("gateways without *_GATEWAY_URL: %v, want none (the logging stand-in)", c.gateways)
	}
	c, err = loadConfig(env(map[string]string{"SMS_GATEWAY_URL": "https://sms.example.org/v1/messages",
		"SMS_GATEWAY_TOKEN": "t", "GATEWAY_TIMEOUT": "2s"}))
	if g, ok := c.gateways[notify.SMS]; err != nil || !ok || g.URL != "https://sms.example.org/v1/messages" || g.Token != "t" || g.Timeout != 2*time.Second {
		t.Errorf("SMS_GATEWAY_URL: %+v, %v", c.gateways, err)
	}
	if _, ok := c.gateways[notify.WhatsApp]; ok {
		t.Errorf("WhatsApp has a gateway without WHATSAPP_GATEWAY_URL: %+v", c.gateways)
	}
	if c, err := loadConfig(env(map[string]string{"COMMUNICATION_HANDLERS": "8"})); err != nil || c.concurrency != 8 {
		t.Errorf("COMMUNICATION_HANDLERS=8: %d, %v", c.concurrency, err)
	}
	for value, want := range map[string]time.Duration{"0": 0, "0s": 0, "250ms": 250 * time.Millisecond, "10m": 10 * time.Minute} {
		if c, err := loadConfig(env(map[string]string{"NOTICE_COALESCE_WINDOW": value})); err != nil || c.coalesceWindow != want {
			t.Errorf("NOTICE_COALESCE_WINDOW=%s: %v, %v; want %v", value, c.coalesceWindow, err, want)
		}
	}
	for name, value := range map[string]string{
		"COMMUNICATION_HANDLERS": "0",
		"HELD_CHECK_INTERVAL":    "-1s",
		"SMTP_STARTTLS":          "maybe",
		"SMTP_TIMEOUT":           "soon",
		"NOTICE_COALESCE_WINDOW": "-1s",
		"GATEWAY_TIMEOUT":        "0s",
		"SMS_GATEWAY_URL":        "gateway.example.org/sms",
		"WHATSAPP_GATEWAY_URL":   "ftp://gateway.example.org",
	} {
		if _, err := loadConfig(env(map[string]string{name: value})); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%s: %v, want an error naming the variable", name, value, err)
		}
	}
}

package main

import (
	"strings"
	"testing"
)

func TestLoadConfig(t *testing.T) {
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	c, err := loadConfig(env(nil))
	if err != nil || c.concurrency != 4 || c.smtp.Addr != "127.0.0.1:1025" {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
	if c, err := loadConfig(env(map[string]string{"COMMUNICATION_HANDLERS": "8"})); err != nil || c.concurrency != 8 {
		t.Errorf("COMMUNICATION_HANDLERS=8: %d, %v", c.concurrency, err)
	}
	for name, value := range map[string]string{
		"COMMUNICATION_HANDLERS": "0",
		"HELD_CHECK_INTERVAL":    "-1s",
		"SMTP_STARTTLS":          "maybe",
		"SMTP_TIMEOUT":           "soon",
	} {
		if _, err := loadConfig(env(map[string]string{name: value})); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%s: %v, want an error naming the variable", name, value, err)
		}
	}
}

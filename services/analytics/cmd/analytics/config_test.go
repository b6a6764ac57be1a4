package main

import (
	"strings"
	"testing"
	"time"
)

func TestLoadConfig(t *testing.T) {
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	c, err := loadConfig(env(map[string]string{"ANALYTICS_FOLD_INTERVAL": "250ms"}))
	if err != nil || c.foldInterval != 250*time.Millisecond || c.reportsWorkers != 2 {
		t.Fatalf("loadConfig = %+v, %v", c, err)
	}
	if c, err := loadConfig(env(nil)); err != nil || c.foldInterval != time.Second {
		t.Errorf("default fold interval = %v (%v), want 1s", c.foldInterval, err)
	}
	for name, value := range map[string]string{
		"ANALYTICS_FOLD_INTERVAL": "1ms",
		"REPORTS_URL_TTL":         "8d",
		"REPORTS_WORKERS":         "0",
	} {
		_, err := loadConfig(env(map[string]string{name: value}))
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%s: %v, want an error naming the variable", name, value, err)
		}
	}
	if _, err := loadConfig(env(map[string]string{"ANALYTICS_FOLD_INTERVAL": "soon"})); err == nil {
		t.Error("ANALYTICS_FOLD_INTERVAL=soon accepted")
	}
}

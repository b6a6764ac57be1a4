package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestProbe(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	env := func(k string) string {
		if k == "HTTP_ADDR" {
			return addr
		}
		return ""
	}
	tests := []struct {
		name   string
		args   []string
		wantOK bool
	}{
		{"HTTP_ADDR healthz", nil, true},
		{"explicit URL", []string{srv.URL + "/healthz"}, true},
		{"503", []string{srv.URL + "/readyz"}, false},
		{"nothing listening", []string{"http://127.0.0.1:1/healthz"}, false},
	}
	for _, tt := range tests {
		if err := run(context.Background(), tt.args, env); (err == nil) != tt.wantOK {
			t.Errorf("%s: run = %v, want ok=%v", tt.name, err, tt.wantOK)
		}
	}
	for addr, want := range map[string]string{":8081": "http://127.0.0.1:8081/healthz", "0.0.0.0:9": "http://127.0.0.1:9/healthz"} {
		if got, err := healthURL(addr); err != nil || got != want {
			t.Errorf("healthURL(%q) = %q, %v; want %q", addr, got, err, want)
		}
	}
}

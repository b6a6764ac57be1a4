package signature_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/gateway/signature"
)

func TestCheck(t *testing.T) {
	at := time.Unix(1_790_000_000, 0)
	body := []byte(`{"id":"1"}`)
	good := signature.Sign("s3cret", at, body)
	tests := []struct {
		name, secret, header string
		body                 []byte
		want                 string // "" when it must pass
	}{
		{"signed", "s3cret", good, body, ""},
		{"other secret", "other", good, body, "bad signature"},
		{"body changed", "s3cret", good, []byte(`{"id":"2"}`), "bad signature"},
		{"no v1", "s3cret", "t=1790000000", body, "malformed"},
		{"empty", "s3cret", "", body, "malformed"},
		{"timestamp not a number", "s3cret", "t=x,v1=" + strings.SplitN(signature.Sign("s3cret", at, body), "v1=", 2)[1], body, "bad signature"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := signature.Check(tt.secret, tt.header, tt.body)
			if tt.want == "" {
				if err != nil || !got.Equal(at) {
					t.Fatalf("Check = %v, %v; want %v", got, err, at)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Check = %v; want an error mentioning %q", err, tt.want)
			}
		})
	}
}

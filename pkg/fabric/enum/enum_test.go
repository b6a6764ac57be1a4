package enum

import (
	"encoding/json"
	"testing"
)

type channel string

func (c channel) Known() bool { return c == "web" || c == "app" }

func TestOpen(t *testing.T) {
	tests := []struct {
		in        string
		wantRaw   string
		wantKnown bool
		wantErr   bool
	}{
		{`"web"`, "web", true, false},
		{`"kiosk"`, "kiosk", false, false},
		{`""`, "", false, false},
		{`7`, "", false, true},
		{`null`, "", false, true},
		{`{"a":1}`, "", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var p struct {
				Channel Open[channel] `json:"channel"`
			}
			err := json.Unmarshal([]byte(`{"channel":`+tt.in+`}`), &p)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Unmarshal(%s) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			v, known := p.Channel.Value()
			if known != tt.wantKnown || string(v) != tt.wantRaw || p.Channel.Raw() != tt.wantRaw {
				t.Errorf("Value() = %q, %v; Raw() = %q; want %q, %v", v, known, p.Channel.Raw(), tt.wantRaw, tt.wantKnown)
			}
			out, err := json.Marshal(p)
			if err != nil || string(out) != `{"channel":`+tt.in+`}` {
				t.Errorf("Marshal = %s, %v; want the value as received", out, err)
			}
		})
	}
	if v, ok := Of(channel("app")).Value(); !ok || v != "app" {
		t.Errorf("Of(app).Value() = %q, %v", v, ok)
	}
}

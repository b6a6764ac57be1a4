package notify

import (
	"errors"
	"strings"
	"testing"
)

func TestContactValidate(t *testing.T) {
	tests := []struct {
		name    string
		in      Contact
		wantErr bool
		wantPre Channel
	}{
		{"email defaults the channel", Contact{CitizenID: "c1", Email: " a@b.org "}, false, Email},
		{"phone for sms", Contact{CitizenID: "c1", Phone: "+5511999990000", Preferred: SMS}, false, SMS},
		{"display name is not a plain address", Contact{CitizenID: "c1", Email: "A <a@b.org>"}, true, ""},
		{"phone not E.164", Contact{CitizenID: "c1", Phone: "11 9999-0000", Preferred: SMS}, true, ""},
		{"preferred channel without address", Contact{CitizenID: "c1", Email: "a@b.org", Preferred: WhatsApp}, true, ""},
		{"unknown channel", Contact{CitizenID: "c1", Email: "a@b.org", Preferred: "fax"}, true, ""},
		{"no citizen", Contact{Email: "a@b.org"}, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.in
			err := c.Validate()
			if (err != nil) != tc.wantErr {
				t.Fatalf("Validate(%+v) = %v, want error %v", tc.in, err, tc.wantErr)
			}
			if err != nil && !errors.Is(err, ErrInvalid) {
				t.Errorf("Validate error %v does not wrap ErrInvalid", err)
			}
			if err == nil && c.Preferred != tc.wantPre {
				t.Errorf("Preferred = %q, want %q", c.Preferred, tc.wantPre)
			}
		})
	}
}

func TestRender(t *testing.T) {
	tests := []struct {
		template string
		params   map[string]string
		wantIn   string
		wantErr  error
	}{
		{TemplateConfirmation, map[string]string{"protocol": "AG-1"}, "AG-1", nil},
		{TemplateConfirmation, nil, "", ErrInvalid},
		{TemplateStatus, map[string]string{"status": "completed"}, "completed", nil},
		{"nope", nil, "", ErrUnknownTemplate},
	}
	for _, tc := range tests {
		subject, body, err := Render(tc.template, tc.params)
		if !errors.Is(err, tc.wantErr) {
			t.Errorf("Render(%q) error = %v, want %v", tc.template, err, tc.wantErr)
			continue
		}
		if err == nil && !strings.Contains(subject+body, tc.wantIn) {
			t.Errorf("Render(%q) = %q / %q, want it to contain %q", tc.template, subject, body, tc.wantIn)
		}
	}
}

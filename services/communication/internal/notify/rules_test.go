package notify

import (
	"errors"
	"testing"
	"time"
)

func TestQuietHoursEndAfter(t *testing.T) {
	sp, err := time.LoadLocation("America/Sao_Paulo") // UTC−3, no DST since 2019
	if err != nil {
		t.Fatalf("tzdata: %v", err)
	}
	at := func(d, h, m int) time.Time { return time.Date(2026, 12, d, h, m, 0, 0, sp) }
	night := QuietHours{Start: "22:00", End: "07:00", TimeZone: "America/Sao_Paulo"}
	lunch := QuietHours{Start: "12:00", End: "13:30", TimeZone: "America/Sao_Paulo"}
	tests := []struct {
		name   string
		q      QuietHours
		now    time.Time
		until  time.Time
		inside bool
	}{
		{"before a night window", night, at(1, 21, 59), time.Time{}, false},
		{"at its start", night, at(1, 22, 0), at(2, 7, 0), true},
		{"after midnight", night, at(2, 3, 15), at(2, 7, 0), true},
		{"at its end", night, at(2, 7, 0), time.Time{}, false},
		{"midday", night, at(2, 12, 0), time.Time{}, false},
		{"inside a day window", lunch, at(2, 12, 45), at(2, 13, 30), true},
		{"outside a day window", lunch, at(2, 13, 30), time.Time{}, false},
		{"a UTC instant inside the local night", night, time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC), at(2, 7, 0), true},
	}
	for _, tc := range tests {
		until, inside := tc.q.EndAfter(tc.now)
		if inside != tc.inside || !until.Equal(tc.until) {
			t.Errorf("%s: EndAfter(%v) = %v, %v; want %v, %v", tc.name, tc.now, until, inside, tc.until, tc.inside)
		}
	}
}

func TestQuietHoursValidate(t *testing.T) {
	tests := []struct {
		q  QuietHours
		ok bool
	}{
		{QuietHours{"22:00", "07:00", "America/Sao_Paulo"}, true},
		{QuietHours{"22:00", "22:00", "America/Sao_Paulo"}, false},
		{QuietHours{"10pm", "07:00", "America/Sao_Paulo"}, false},
		{QuietHours{"22:00", "07:00", ""}, false},
		{QuietHours{"22:00", "07:00", "Mars/Olympus"}, false},
	}
	for _, tc := range tests {
		err := tc.q.Validate()
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("Validate(%+v) = %v, want ok=%v", tc.q, err, tc.ok)
		}
	}
}

func TestDecide(t *testing.T) {
	no := false
	quiet := &QuietHours{Start: "22:00", End: "07:00", TimeZone: "UTC"}
	night := time.Date(2026, 12, 1, 23, 0, 0, 0, time.UTC)
	day := time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC)
	morning := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		c        Contact
		ch       Channel
		template string
		now      time.Time
		want     Verdict
		until    time.Time
	}{
		{"progress notice, consent given by default", Contact{}, Email, TemplateStatus, day, Send, time.Time{}},
		{"progress notice, consent withdrawn", Contact{ProgressNotices: &no}, Email, TemplateStatus, day, Withhold, time.Time{}},
		{"confirmation needs no consent", Contact{ProgressNotices: &no}, Email, TemplateConfirmation, day, Send, time.Time{}},
		{"sms at night waits for the morning", Contact{QuietHours: quiet}, SMS, TemplateStatus, night, Hold, morning},
		{"whatsapp at night waits too", Contact{QuietHours: quiet}, WhatsApp, TemplateConfirmation, night, Hold, morning},
		{"e-mail at night goes", Contact{QuietHours: quiet}, Email, TemplateStatus, night, Send, time.Time{}},
		{"sms by day goes", Contact{QuietHours: quiet}, SMS, TemplateStatus, day, Send, time.Time{}},
		{"no consent beats quiet hours", Contact{ProgressNotices: &no, QuietHours: quiet}, SMS, TemplateStatus, night, Withhold, time.Time{}},
	}
	for _, tc := range tests {
		got, until := Decide(tc.c, tc.ch, tc.template, tc.now)
		if got != tc.want || !until.Equal(tc.until) {
			t.Errorf("%s: Decide = %v, %v; want %v, %v", tc.name, got, until, tc.want, tc.until)
		}
	}
}

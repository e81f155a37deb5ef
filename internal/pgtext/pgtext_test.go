package pgtext_test

import (
	"math"
	"net/netip"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/harbormaster-dev/harbormaster/internal/pgtext"
)

// TestRenderings: PostgreSQL's own output for each form (checked against
// a real server end to end by the Pilot's TestValuesInJSON).
func TestRenderings(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{pgtext.Interval(pgtype.Interval{Months: 14, Days: 3, Microseconds: 4*3600e6 + 5*60e6 + 6.5e6, Valid: true}), "1 year 2 mons 3 days 04:05:06.5"},
		{pgtext.Interval(pgtype.Interval{Days: -3, Microseconds: -1e6, Valid: true}), "-3 days -00:00:01"},
		{pgtext.Interval(pgtype.Interval{Valid: true}), "00:00:00"},
		{pgtext.Clock(12*3600e6 + 34*60e6 + 56789000), "12:34:56.789"},
		{pgtext.Float(math.NaN(), 64), "NaN"},
		{pgtext.Float(math.Inf(-1), 32), "-Infinity"},
		{pgtext.Float(1.5, 64), "1.5"},
		{pgtext.Time(pgtext.OIDDate, time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC)), "2024-01-02"},
		{pgtext.Time(pgtext.OIDDate, time.Date(-43, 3, 15, 0, 0, 0, 0, time.UTC)), "0044-03-15 BC"},
		{pgtext.Time(pgtext.OIDTimestamp, time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)), "10000-01-01 00:00:00"},
		{pgtext.Time(pgtext.OIDTimestamptz, time.Date(-43, 3, 15, 10, 0, 0, 250e6, time.UTC)), "0044-03-15 10:00:00.25+00 BC"},
		{pgtext.Inet(pgtext.OIDInet, netip.MustParsePrefix("10.0.0.1/32")), "10.0.0.1"},
		{pgtext.Inet(pgtext.OIDInet, netip.MustParsePrefix("10.0.0.1/24")), "10.0.0.1/24"},
		{pgtext.Inet(pgtext.OIDCidr, netip.MustParsePrefix("10.0.0.0/8")), "10.0.0.0/8"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	if pgtext.InRFC3339(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)) || !pgtext.InRFC3339(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Error("InRFC3339: years 0000 to 9999 only")
	}
}

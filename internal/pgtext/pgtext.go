// Package pgtext renders Go values as PostgreSQL's own text output, for
// the values pgx decodes into Go types that have no faithful JSON form:
// intervals, times of day, non-finite floats, dates, and times outside
// the years 1 to 9999. The Pilot answers rows with these strings where
// JSON has no better form ("others as their text", docs/api.md), and the
// wire front sends the same text to its clients.
package pgtext

import (
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// Type OIDs of PostgreSQL's built-in types that the renderings depend on.
const (
	OIDDate        = 1082
	OIDTimestamp   = 1114
	OIDTimestamptz = 1184
	OIDInet        = 869
	OIDCidr        = 650
)

// Interval is PostgreSQL's interval output (IntervalStyle postgres), as
// in "1 year 2 mons 3 days 04:05:06.5".
func Interval(iv pgtype.Interval) string {
	var parts []string
	unit := func(n int64, one string) {
		if n == 0 {
			return
		}
		s := fmt.Sprintf("%d %s", n, one)
		if n != 1 && n != -1 {
			s += "s"
		}
		parts = append(parts, s)
	}
	unit(int64(iv.Months/12), "year")
	unit(int64(iv.Months%12), "mon")
	unit(int64(iv.Days), "day")
	if us := iv.Microseconds; us != 0 || len(parts) == 0 {
		sign := ""
		if us < 0 {
			sign, us = "-", -us
		}
		parts = append(parts, sign+Clock(us))
	}
	return strings.Join(parts, " ")
}

// Clock is a time of day (or an interval's time part) given in
// microseconds as HH:MM:SS, with the fraction PostgreSQL shows (none when
// whole, else trailing zeros trimmed).
func Clock(us int64) string {
	s := fmt.Sprintf("%02d:%02d:%02d", us/3600000000, us/60000000%60, us/1000000%60)
	if frac := us % 1000000; frac != 0 {
		s += strings.TrimRight(fmt.Sprintf(".%06d", frac), "0")
	}
	return s
}

// Float is a float4 (bits 32) or float8 (bits 64) as PostgreSQL prints
// it, Infinity, -Infinity and NaN included.
func Float(f float64, bits int) string {
	switch {
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case math.IsNaN(f):
		return "NaN"
	}
	return strconv.FormatFloat(f, 'g', -1, bits)
}

// Finite reports whether f has a JSON number form.
func Finite(f float64) bool { return !math.IsInf(f, 0) && !math.IsNaN(f) }

// Time is a date (OIDDate), a timestamp (OIDTimestamp) or, for any other
// oid, a timestamptz in UTC (the Pilot's session time zone), as
// PostgreSQL prints it, years before 1 as BC.
func Time(oid uint32, t time.Time) string {
	if oid != OIDTimestamp && oid != OIDDate {
		t = t.UTC()
	}
	y, bc := t.Year(), ""
	if y <= 0 {
		// Go's year 0 is 1 BC; PostgreSQL counts no year 0.
		y, bc = 1-y, " BC"
	}
	s := fmt.Sprintf("%04d-%02d-%02d", y, t.Month(), t.Day())
	if oid == OIDDate {
		return s + bc
	}
	s += " " + Clock(int64(t.Hour())*3600000000+int64(t.Minute())*60000000+int64(t.Second())*1000000+int64(t.Nanosecond()/1000))
	if oid != OIDTimestamp {
		s += "+00"
	}
	return s + bc
}

// InRFC3339 reports whether t has an RFC 3339 form (years 0000 to 9999,
// which encoding/json requires).
func InRFC3339(t time.Time) bool {
	y := t.UTC().Year()
	return y >= 0 && y <= 9999
}

// Inet is an inet (OIDInet: a host address without its /32 or /128) or a
// cidr (any other oid: always with its prefix length).
func Inet(oid uint32, p netip.Prefix) string {
	if oid == OIDInet && p.Bits() == p.Addr().BitLen() {
		return p.Addr().String()
	}
	return p.String()
}

package pay

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/mandatevm/mandate/kernel/kindapi"
)

// MaxMinor bounds every amount, in minor units (10^15 minor units is ten
// trillion in a two-decimal currency): sums of amounts never overflow int64.
const MaxMinor = 1_000_000_000_000_000

// parseDecimal parses a non-negative decimal with at most two fractional
// digits ("612", "612.5", "612.00") into minor units (hundredths). Signs,
// exponents, spaces, "NaN", "Inf", a leading or trailing dot and more than
// two decimals are refused.
func parseDecimal(s string) (int64, error) {
	if s == "" {
		return 0, errors.New("empty amount")
	}
	whole, frac, hasDot := strings.Cut(s, ".")
	if whole == "" || (hasDot && frac == "") {
		return 0, fmt.Errorf("amount %s is not a decimal like \"612.00\"", kindapi.QuoteTrunc(s))
	}
	if len(frac) > 2 {
		return 0, fmt.Errorf("amount %s has more than 2 decimals", kindapi.QuoteTrunc(s))
	}
	if len(whole) > 16 {
		return 0, fmt.Errorf("amount %s is too large", kindapi.QuoteTrunc(s))
	}
	for _, c := range whole + frac {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("amount %s is not a non-negative decimal like \"612.00\"", kindapi.QuoteTrunc(s))
		}
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("amount %s: %v", kindapi.QuoteTrunc(s), err)
	}
	for len(frac) < 2 {
		frac += "0"
	}
	f, _ := strconv.ParseInt(frac, 10, 64)
	v := w*100 + f
	if v > MaxMinor {
		return 0, fmt.Errorf("amount %s is too large (max %s)", kindapi.QuoteTrunc(s), formatMinor(MaxMinor))
	}
	return v, nil
}

// parseMoney parses "800", "800.00" or "800.00 USD". When the string names
// a currency it must be want (when want is not empty); the currency found
// is returned upper-cased ("" when none).
func parseMoney(s, want string) (int64, string, error) {
	num, cur, hasCur := strings.Cut(strings.TrimSpace(s), " ")
	var c string
	if hasCur {
		var err error
		if c, err = canonCurrency(strings.TrimSpace(cur)); err != nil {
			return 0, "", err
		}
		if want != "" && c != want {
			return 0, "", fmt.Errorf("amount %s is in %s, not %s", kindapi.QuoteTrunc(s), c, want)
		}
	}
	v, err := parseDecimal(num)
	return v, c, err
}

// formatMinor renders minor units as a decimal with two places: 61200 is
// "612.00".
func formatMinor(v int64) string {
	return fmt.Sprintf("%d.%02d", v/100, v%100)
}

// canonCurrency validates an ISO 4217 style code (three ASCII letters) and
// returns it upper-cased.
func canonCurrency(s string) (string, error) {
	if len(s) != 3 {
		return "", fmt.Errorf("currency %s is not a three-letter ISO code", kindapi.QuoteTrunc(s))
	}
	for _, c := range s {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z') {
			return "", fmt.Errorf("currency %s is not a three-letter ISO code", kindapi.QuoteTrunc(s))
		}
	}
	return strings.ToUpper(s), nil
}

// canonPayee validates a payee name and returns it lower-cased: 1..253
// bytes of ASCII letters, digits, '.', '-', '_' and ':'.
func canonPayee(s string) (string, error) {
	if s == "" || len(s) > 253 {
		return "", fmt.Errorf("payee %s: length must be 1..253", kindapi.QuoteTrunc(s))
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_' || c == ':') {
			return "", fmt.Errorf("payee %s has a character other than letters, digits, '.', '-', '_', ':'", kindapi.QuoteTrunc(s))
		}
	}
	return strings.ToLower(s), nil
}

// Byte sizes and durations as manifests and configuration files write
// them: "64MiB", "2s".

package vocab

import (
	"bytes"
	"encoding/json"
	"math/bits"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
)

// ByteSize is a number of bytes written as an integer or a string with a unit:
// "512", "64KiB", "32MiB", "1GiB", "1TiB" (binary) or "1KB", "1MB", "1GB"
// (decimal).
type ByteSize uint64

var byteUnits = []struct {
	suffix string
	mult   uint64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"B", 1},
}

// ParseByteSize parses "64MiB" and friends.
func ParseByteSize(s string) (ByteSize, error) {
	num, mult := s, uint64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	num = strings.ReplaceAll(num, "_", "")
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil || num == "" || num[0] == '+' {
		return 0, errors.New(`want a byte size such as 1048576, "512KiB", "64MiB" or "1GiB"`)
	}
	hi, lo := bits.Mul64(n, mult)
	if hi != 0 {
		return 0, errors.New("byte size overflows 64 bits")
	}
	return ByteSize(lo), nil
}

// String renders the size in the largest binary unit that divides it.
func (b ByteSize) String() string {
	for _, u := range []struct {
		suffix string
		mult   uint64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if b != 0 && uint64(b)%u.mult == 0 {
			return strconv.FormatUint(uint64(b)/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatUint(uint64(b), 10)
}

// UnmarshalJSON accepts a JSON number or string.
func (b *ByteSize) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '"' {
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		v, err := ParseByteSize(s)
		if err != nil {
			return err
		}
		*b = v
		return nil
	}
	n, err := strconv.ParseUint(string(data), 10, 64)
	if err != nil {
		return errors.New(`want a non-negative integer of bytes or a string such as "64MiB"`)
	}
	*b = ByteSize(n)
	return nil
}

// MarshalJSON renders the size as a JSON integer (exact, unit-free).
func (b ByteSize) MarshalJSON() ([]byte, error) {
	return strconv.AppendUint(nil, uint64(b), 10), nil
}

// UnmarshalText accepts the string forms (for TOML and flags).
func (b *ByteSize) UnmarshalText(text []byte) error {
	v, err := ParseByteSize(string(text))
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// Duration is a time.Duration written as a Go duration string ("2s", "150ms").
type Duration time.Duration

// MarshalJSON renders the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON accepts a Go duration string.
func (d *Duration) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return errors.New(`want a duration string such as "2s" or "150ms"`)
	}
	return d.UnmarshalText([]byte(s))
}

// UnmarshalText accepts a Go duration string.
func (d *Duration) UnmarshalText(text []byte) error {
	v, err := time.ParseDuration(string(text))
	if err != nil {
		return errors.New(`want a duration string such as "2s" or "150ms"`)
	}
	*d = Duration(v)
	return nil
}

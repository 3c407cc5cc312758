package sequence

import (
	"encoding/hex"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/stores"
)

// Limits on the arguments of a sequence.
const (
	// MaxSeriesLen is the longest series name, in bytes.
	MaxSeriesLen = 200
	// MaxPartitionLen is the longest encoded partition tuple, in bytes.
	MaxPartitionLen = 512
	// MaxRequestIDLen is the longest request id accepted by Claim, in bytes.
	MaxRequestIDLen = 128
	// MaxReasonLen is the longest reason accepted by Void, in bytes.
	MaxReasonLen = 1024
)

// Key layout, relative to the Service prefix:
//
//	_sequences/<series>                       counter, unpartitioned
//	_sequences/<series>\x00<partition>        counter, partitioned
//	<counter key>\x01c\x00<request id>        claim record (transactional stores, Service without ClaimMAC)
//	<counter key>\x01h\x00<32 hex digits>     claim record keyed by the MAC of the request id (with ClaimMAC)
//	<counter key>\x01v\x00<decimal number>    void marker
//	_sequences/<series>\x01d\x00              the series' definition (see Definition)
//
// Series names hold no control characters and encoded partitions hold neither
// NUL nor \x01, so a counter key never contains \x01, and the text before the
// first \x01 of any key names its counter: the six kinds cannot collide (a
// definition's key is that of the unpartitioned counter with its own tag,
// which no claim or void record uses). A series with periods counts each
// period under its partition followed by the period's label.
const (
	sequencesDir = "_sequences/"
	claimTag     = "\x01c\x00"
	macClaimTag  = "\x01h\x00"
	voidTag      = "\x01v\x00"
)

// claimMACLen is how many bytes of the MAC name a claim record: 128 bits,
// so two request ids of one counter do not collide.
const claimMACLen = 16

// checkSeries validates a series name.
func checkSeries(series string) error {
	switch {
	case series == "":
		return invalid("series", series, "empty")
	case len(series) > MaxSeriesLen:
		return invalid("series", series, fmt.Sprintf("longer than %d bytes", MaxSeriesLen))
	case strings.IndexByte(series, 0) >= 0:
		return invalid("series", series, "contains a NUL byte")
	case !utf8.ValidString(series):
		return invalid("series", series, "not valid UTF-8")
	case strings.IndexFunc(series, unicode.IsControl) >= 0:
		return invalid("series", series, "contains a control character")
	}
	return nil
}

// normalizePartition turns partition components into their canonical text:
// strings as they are, integers (of any int or uint kind) in decimal, so 2026
// and "2026" name the same partition.
func normalizePartition(parts []any) ([]string, error) {
	if len(parts) == 0 {
		return nil, nil
	}
	out := make([]string, len(parts))
	for i, p := range parts {
		s, err := component(p)
		if err != nil {
			return nil, invalid("partition", fmt.Sprintf("%d: %v", i, p), err.Error())
		}
		out[i] = s
	}
	return out, nil
}

func component(p any) (string, error) {
	var s string
	switch v := p.(type) {
	case string:
		s = v
	case int:
		s = strconv.FormatInt(int64(v), 10)
	case int64:
		s = strconv.FormatInt(v, 10)
	case uint64:
		s = strconv.FormatUint(v, 10)
	case nil:
		return "", fmt.Errorf("nil component")
	default:
		rv := reflect.ValueOf(p)
		switch rv.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			s = strconv.FormatInt(rv.Int(), 10)
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
			s = strconv.FormatUint(rv.Uint(), 10)
		case reflect.String:
			s = rv.String()
		default:
			return "", fmt.Errorf("component of type %T: want a string or an integer", p)
		}
	}
	switch {
	case s == "":
		return "", fmt.Errorf("empty component")
	case !utf8.ValidString(s):
		return "", fmt.Errorf("component not valid UTF-8")
	}
	return s, nil
}

// encodePartition joins components with '/', escaping '%', '/', NUL and \x01
// as %25, %2F, %00 and %01, so the encoding is injective and holds neither
// NUL nor \x01.
func encodePartition(parts []string) string {
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte('/')
		}
		for j := 0; j < len(p); j++ {
			switch c := p[j]; c {
			case '%':
				b.WriteString("%25")
			case '/':
				b.WriteString("%2F")
			case 0:
				b.WriteString("%00")
			case 1:
				b.WriteString("%01")
			default:
				b.WriteByte(c)
			}
		}
	}
	return b.String()
}

func init() { wire.SequenceCounterOf = counterOf }

// decodePartition reverses encodePartition, and only it: text that
// encodePartition never makes (an empty component, a raw NUL or \x01, an
// escape other than those four) is an error, so what it decodes encodes back
// to enc, and a counter key names exactly one partition.
func decodePartition(enc string) ([]string, error) {
	var parts []string
	for p := range strings.SplitSeq(enc, "/") {
		if p == "" {
			return nil, fmt.Errorf("partition %q: empty component", enc)
		}
		var b strings.Builder
		for i := 0; i < len(p); i++ {
			if p[i] == 0 || p[i] == 1 {
				return nil, fmt.Errorf("partition %q: unescaped control byte %#x", enc, p[i])
			}
			if p[i] != '%' {
				b.WriteByte(p[i])
				continue
			}
			if i+2 >= len(p) {
				return nil, fmt.Errorf("partition %q: truncated escape", enc)
			}
			switch p[i+1 : i+3] {
			case "25":
				b.WriteByte('%')
			case "2F":
				b.WriteByte('/')
			case "00":
				b.WriteByte(0)
			case "01":
				b.WriteByte(1)
			default:
				return nil, fmt.Errorf("partition %q: unknown escape %q", enc, p[i:i+3])
			}
			i += 2
		}
		parts = append(parts, b.String())
	}
	return parts, nil
}

// counterOf tells whether key (relative to a vault's prefix) is the key of
// a counter, and of which series and partition. Claim and void records
// (after a \x01) are not counters.
func counterOf(key string) (series string, partition []string, ok bool, err error) {
	rest, found := strings.CutPrefix(key, sequencesDir)
	if !found || strings.ContainsRune(rest, 1) {
		return "", nil, false, nil
	}
	series, enc, partitioned := strings.Cut(rest, "\x00")
	if partitioned {
		if partition, err = decodePartition(enc); err != nil {
			return "", nil, false, err
		}
	}
	return series, partition, true, nil
}

// counterKey builds the store key of a counter and checks it leaves room for
// the longest claim key.
func counterKey(prefix, series string, partition []string) (string, error) {
	key := prefix + sequencesDir + series
	if len(partition) > 0 {
		enc := encodePartition(partition)
		if len(enc) > MaxPartitionLen {
			return "", invalid("partition", enc, fmt.Sprintf("encodes to more than %d bytes", MaxPartitionLen))
		}
		key += "\x00" + enc
	}
	if len(key)+len(claimTag)+MaxRequestIDLen > stores.MaxKeyLen {
		return "", invalid("series", series, "key too long for the store")
	}
	return key, nil
}

// claimKey is the store key of the claim record of requestID on the counter
// at key counter: the id itself, or with a ClaimMAC the MAC of counter and
// id, so the store never sees request ids (they are often order numbers or
// other business data). The ledger, sealed, still holds the id: a vault whose
// claim records were keyed by the id before finds them there (see findClaim).
//
// A ClaimMAC wiped by a Close that a Claim raced gives no MAC: that is
// stores.ErrClosed, never a key (an empty MAC would name every request's
// claim alike).
func (s *service) claimKey(counter, requestID string) (string, error) {
	if s.claimMAC == nil {
		return counter + claimTag + requestID, nil
	}
	sum := s.claimMAC.MAC([]byte(counter), []byte(requestID))
	if len(sum) < claimMACLen {
		return "", stores.ErrClosed
	}
	return counter + macClaimTag + hex.EncodeToString(sum[:claimMACLen]), nil
}

func voidKey(counter string, n uint64) string {
	return counter + voidTag + strconv.FormatUint(n, 10)
}

// indexKey is how the in-memory index of claims read from the History keys
// a request id: the MAC of claimKey when the Service has a ClaimMAC (16
// bytes, whatever the id's length), the id itself otherwise.
func (s *service) indexKey(requestID string) string {
	if s.claimMAC == nil {
		return requestID
	}
	return string(s.claimMAC.MAC([]byte(requestID))[:claimMACLen])
}

// checkRequestID validates a request id for Claim.
func checkRequestID(id string) error {
	switch {
	case id == "":
		return invalid("request id", id, "empty")
	case len(id) > MaxRequestIDLen:
		return invalid("request id", id, fmt.Sprintf("longer than %d bytes", MaxRequestIDLen))
	case strings.IndexByte(id, 0) >= 0:
		return invalid("request id", id, "contains a NUL byte")
	}
	return nil
}

// parseRequestID parses a UUIDv7 request id, as needed on stores without
// transactions, where ids are ordered by time to bound what is remembered.
func parseRequestID(id string) ([16]byte, error) {
	u, err := uuid.Parse(id)
	if err != nil || u.Version() != 7 || u.Variant() != uuid.RFC4122 {
		return [16]byte{}, invalid("request id", id, "not a UUIDv7 (make ids with NewRequestID): required on a store without transactions")
	}
	return u, nil
}

// NewRequestID returns a fresh request id for Claim: a UUIDv7 in its text form.
// Ids are ordered by creation time, which lets a store without transactions
// remember a bounded window of them and fail closed on older ones.
func NewRequestID() string {
	return uuid.Must(uuid.NewV7()).String()
}

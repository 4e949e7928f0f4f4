package fake

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/sharding"
)

// shardSelectorLimit is the longest shardSelector parsed, in code points:
// the limit of the CEL parser kube-apiserver parses it with.
const shardSelectorLimit = 100_000

// The field paths a shardSelector may hash, as kube-apiserver's.
const (
	shardKeyUID       = "object.metadata.uid"
	shardKeyNamespace = "object.metadata.namespace"
	// shardEnd is the exclusive end of the whole hash space, 2^64.
	shardEnd = "0x10000000000000000"
)

// shardSelector returns the shardSelector of a list, watch or
// deletecollection to apply: nil when Options.ShardSelector is off or the
// request has none. A selector that does not parse is a 400 BadRequest.
func (c *Cluster) shardSelector(opts *metainternalversion.ListOptions) (sharding.Selector, error) {
	if !c.sharding || opts.ShardSelector == "" {
		return nil, nil
	}
	sel, err := parseShardSelector(opts.ShardSelector)
	if err != nil {
		return nil, apierrors.NewBadRequest("invalid shard selector: " + err.Error())
	}
	return sel, nil
}

// parseShardSelector parses a shardSelector, kube-apiserver's rules
// (k8s.io/apiserver/pkg/sharding.Parse) on a strict subset of its CEL
// syntax:
//
//	shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(...)
//
// One or more shardRange calls joined by ||, all hashing the same field
// (object.metadata.uid or object.metadata.namespace), each with a start and
// an end that are quoted (' or ") 0x and 16 lowercase hex digits, or
// 0x10000000000000000 (2^64), the start below the end. Whitespace may
// stand between the tokens. The CEL spellings kube-apiserver accepts
// beyond these (parentheses, escapes in the strings, raw or triple-quoted
// strings, comments) are refused. It returns an error, never panics, and
// reads the input once, left to right.
func parseShardSelector(s string) (sharding.Selector, error) {
	if n := utf8.RuneCountInString(s); n > shardSelectorLimit {
		return nil, fmt.Errorf("expression code point size exceeds limit: size: %d, limit %d", n, shardSelectorLimit)
	}
	p := &shardParser{s: s}
	p.space()
	if p.end() {
		return nil, errors.New("empty shard selector is not allowed; omit the parameter for unfiltered lists")
	}
	var reqs []sharding.ShardRangeRequirement
	for {
		req, err := p.shardRange()
		if err != nil {
			return nil, err
		}
		if len(reqs) > 0 && req.Key != reqs[0].Key {
			return nil, fmt.Errorf("all shard ranges must use the same field, got %q and %q", reqs[0].Key, req.Key)
		}
		reqs = append(reqs, req)
		p.space()
		if p.end() {
			return sharding.NewSelector(reqs...), nil
		}
		if err := p.token("||"); err != nil {
			return nil, err
		}
	}
}

// shardParser reads a shardSelector; i is the offset of the next byte.
type shardParser struct {
	s string
	i int
}

func (p *shardParser) end() bool { return p.i >= len(p.s) }

// space skips CEL's whitespace.
func (p *shardParser) space() {
	for !p.end() && strings.IndexByte(" \t\r\n\f", p.s[p.i]) >= 0 {
		p.i++
	}
}

// errorf is a syntax error at the next byte.
func (p *shardParser) errorf(format string, args ...any) error {
	found := "the end"
	if !p.end() {
		r, _ := utf8.DecodeRuneInString(p.s[p.i:])
		found = fmt.Sprintf("%q", r)
	}
	return fmt.Errorf("syntax error at offset %d: %s, found %s", p.i, fmt.Sprintf(format, args...), found)
}

// token skips whitespace and then tok, or fails.
func (p *shardParser) token(tok string) error {
	p.space()
	if !strings.HasPrefix(p.s[p.i:], tok) {
		return p.errorf("expected %q", tok)
	}
	p.i += len(tok)
	return nil
}

// ident skips whitespace and reads an identifier, or fails.
func (p *shardParser) ident() (string, error) {
	p.space()
	start := p.i
	for !p.end() {
		b := p.s[p.i]
		if b != '_' && (b < 'a' || b > 'z') && (b < 'A' || b > 'Z') && (p.i == start || b < '0' || b > '9') {
			break
		}
		p.i++
	}
	if p.i == start {
		return "", p.errorf("expected an identifier")
	}
	return p.s[start:p.i], nil
}

// shardRange reads shardRange(field, 'start', 'end').
func (p *shardParser) shardRange() (sharding.ShardRangeRequirement, error) {
	var req sharding.ShardRangeRequirement
	fn, err := p.ident()
	if err != nil {
		return req, err
	}
	if fn != "shardRange" {
		return req, fmt.Errorf("unsupported function %q; only shardRange() and || are allowed", fn)
	}
	if err := p.token("("); err != nil {
		return req, err
	}
	// The field: identifiers joined by dots.
	var path []string
	for {
		id, err := p.ident()
		if err != nil {
			return req, err
		}
		path = append(path, id)
		p.space()
		if p.end() || p.s[p.i] != '.' {
			break
		}
		p.i++
	}
	switch req.Key = strings.Join(path, "."); req.Key {
	case shardKeyUID, shardKeyNamespace:
	default:
		return req, fmt.Errorf("unsupported field path %q; supported: %s, %s", req.Key, shardKeyUID, shardKeyNamespace)
	}
	if err := p.token(","); err != nil {
		return req, err
	}
	if req.Start, err = p.hex("hexStart"); err != nil {
		return req, err
	}
	if err := p.token(","); err != nil {
		return req, err
	}
	if req.End, err = p.hex("hexEnd"); err != nil {
		return req, err
	}
	if err := p.token(")"); err != nil {
		return req, err
	}
	if !sharding.HexLess(req.Start, req.End) {
		return req, fmt.Errorf("shard range start %s must be less than end %s", req.Start, req.End)
	}
	return req, nil
}

// hex reads a quoted bound: 0x and 16 lowercase hex digits, or 2^64.
func (p *shardParser) hex(name string) (string, error) {
	p.space()
	if p.end() || (p.s[p.i] != '\'' && p.s[p.i] != '"') {
		return "", p.errorf("%s must be a string literal (e.g. '0xff')", name)
	}
	quote := p.s[p.i]
	if strings.HasPrefix(p.s[p.i:], strings.Repeat(string(quote), 3)) {
		return "", p.errorf("%s: triple-quoted strings are not supported", name)
	}
	p.i++
	n := strings.IndexByte(p.s[p.i:], quote)
	if n < 0 {
		return "", p.errorf("%s: unterminated string", name)
	}
	s := p.s[p.i : p.i+n]
	if strings.ContainsAny(s, "\\\n\r") {
		return "", p.errorf("%s: escape sequences and line breaks in strings are not supported", name)
	}
	p.i += n + 1
	hex, ok := strings.CutPrefix(s, "0x")
	switch {
	case !ok:
		return "", fmt.Errorf("%s must have '0x' prefix, got %q", name, s)
	case hex == "":
		return "", fmt.Errorf("%s: hex value is required after '0x'", name)
	case len(hex) > 17:
		return "", fmt.Errorf("%s: hex value too long (%d chars, max 17): %q", name, len(hex), hex)
	}
	for _, r := range hex {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return "", fmt.Errorf("%s: invalid hex character %q in %q", name, string(r), s)
		}
	}
	switch {
	case len(hex) == 17 && s != shardEnd:
		return "", fmt.Errorf("%s: 17-digit hex value must be '%s' (2^64), got %q", name, shardEnd, s)
	case len(hex) < 16:
		return "", fmt.Errorf("%s must be a 0x-prefixed 16-digit hex value, got %q (did you mean %q?)", name, s, "0x"+strings.Repeat("0", 16-len(hex))+hex)
	}
	return s, nil
}

// Package redisfence is the Redis recipe for fenced writes (F3): a Lua
// script compares the write's token with the highest accepted and sets the
// token and the value in one atomic step.
//
// Rule names such as F1 or §12 refer to docs/design.md in the repository.
//
// A resource id is two keys, PREFIX{ID}:token and PREFIX{ID}:value. Both
// carry the hash tag {ID}, so they live in one slot and the script works on
// Redis Cluster. Tokens are stored as decimal strings; Lua numbers are
// doubles, so tokens must stay below 2^53 (F5).
//
// Redis keeps the highest token only as durably as it keeps any key: a
// server without persistence that restarts, a fail-over that loses recent
// writes, or eviction (use maxmemory-policy noeviction) forgets it, and a
// stale holder's write could then be accepted. Where that matters, fence
// with PostgreSQL (package pgfence).
//
// The client is the caller's (any redis.UniversalClient); this package never
// closes it.
package redisfence

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/fencing"
)

// MaxToken is the largest token the recipe accepts: Lua compares tokens as
// doubles, which are exact only below 2^53.
const MaxToken backends.Token = 1<<53 - 1

// maxRedisValue is Redis's largest string (proto-max-bulk-len's default).
const maxRedisValue = 512 << 20

// writeScript is the check and the write in one step.
//
//	KEYS[1] the token key, KEYS[2] the value key (one hash tag)
//	ARGV[1] the write's token, ARGV[2] its value
//
// It returns {1, token} if the write was accepted, {0, highest} if the token
// is lower than the highest accepted.
var writeScript = redis.NewScript(`
local highest = tonumber(redis.call('GET', KEYS[1]) or '0')
local token = tonumber(ARGV[1])
if token < highest then
  return {0, highest}
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[2])
return {1, token}
`)

// Store writes fenced values to the keys of one prefix. It is safe for
// concurrent use.
type Store struct {
	client       redis.UniversalClient
	prefix       string
	maxValueSize int
}

// Option configures a [Store].
type Option func(*Store) error

// WithMaxValueSize sets the largest value, in bytes, that [Store.Write]
// accepts (default [fencing.DefaultMaxValueSize]); larger values are refused
// with an error wrapping [fencing.ErrValueTooLarge] before any round trip.
func WithMaxValueSize(n int) Option {
	return func(s *Store) error {
		if n < 0 || n > maxRedisValue {
			return fmt.Errorf("redisfence: max value size %d: want 0 to %d bytes", n, maxRedisValue)
		}
		s.maxValueSize = n
		return nil
	}
}

// New returns a Store whose keys start with prefix (for example
// "myapp:fence:"), reached through client. The prefix may be empty; it must
// not contain '{' or '}', which would move the hash tag. New makes no call to
// Redis.
func New(client redis.UniversalClient, prefix string, opts ...Option) (*Store, error) {
	if isNil(client) {
		return nil, errors.New("redisfence: nil client: want a *redis.Client, *redis.ClusterClient or other redis.UniversalClient")
	}
	if strings.ContainsAny(prefix, "{}") {
		return nil, fmt.Errorf("redisfence: prefix %q: must not contain '{' or '}' (the hash tag is the resource id)", prefix)
	}
	s := &Store{client: client, prefix: prefix, maxValueSize: fencing.DefaultMaxValueSize}
	for _, opt := range opts {
		if err := opt(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// isNil reports whether c is nil or one of go-redis's client pointers holding
// nil, which would otherwise panic on the first write rather than fail here.
func isNil(c redis.UniversalClient) bool {
	switch c := c.(type) {
	case nil:
		return true
	case *redis.Client:
		return c == nil
	case *redis.ClusterClient:
		return c == nil
	case *redis.Ring:
		return c == nil
	}
	return false
}

// keys returns the token and value keys of id, under one hash tag.
func (s *Store) keys(id string) []string {
	base := s.prefix + "{" + id + "}:"
	return []string{base + "token", base + "value"}
}

func checkID(id string) error {
	if id == "" || strings.ContainsAny(id, "{}") {
		return fmt.Errorf("redisfence: resource id %q: want a non-empty string without '{' or '}'", id)
	}
	return nil
}

// Write stores value for the resource id with token, if token is not lower
// than the highest token accepted for id, in one round trip (EVALSHA). It
// returns nil if the write was accepted; an error wrapping
// [fencing.ErrStaleToken] if it was rejected; [fencing.ErrInvalidToken]
// (token below 1 or above [MaxToken]) or [fencing.ErrValueTooLarge] for bad
// input, with no round trip; a Redis error otherwise.
func (s *Store) Write(ctx context.Context, id string, token backends.Token, value []byte) error {
	if s == nil {
		return errors.New("redisfence: nil *Store")
	}
	if err := checkID(id); err != nil {
		return err
	}
	if err := fencing.CheckToken(token); err != nil {
		return fmt.Errorf("redisfence: id %q: %w", id, err)
	}
	if token > MaxToken {
		return fmt.Errorf("redisfence: id %q: %w: %d; Redis fencing tokens must be below 2^53", id, fencing.ErrInvalidToken, token)
	}
	if len(value) > s.maxValueSize {
		return fmt.Errorf("redisfence: id %q: %w: %d bytes; at most %d", id, fencing.ErrValueTooLarge, len(value), s.maxValueSize)
	}
	res, err := writeScript.Run(ctx, s.client, s.keys(id), int64(token), value).Int64Slice()
	if err != nil {
		return fmt.Errorf("redisfence: id %q: write: %w", id, err)
	}
	if len(res) != 2 {
		return fmt.Errorf("redisfence: id %q: write: unexpected reply %v", id, res)
	}
	if res[0] != 1 {
		return fmt.Errorf("redisfence: id %q: %w", id, fencing.StaleError(token, backends.Token(res[1])))
	}
	return nil
}

// Read returns the value last accepted for id and its token, the highest
// token accepted for id; nil and 0 if id was never written. One round trip
// (MGET of both keys).
func (s *Store) Read(ctx context.Context, id string) ([]byte, backends.Token, error) {
	if s == nil {
		return nil, 0, errors.New("redisfence: nil *Store")
	}
	if err := checkID(id); err != nil {
		return nil, 0, err
	}
	vals, err := s.client.MGet(ctx, s.keys(id)...).Result()
	if err != nil {
		return nil, 0, fmt.Errorf("redisfence: id %q: read: %w", id, err)
	}
	tokStr, tokOK := vals[0].(string)
	valStr, valOK := vals[1].(string)
	switch {
	case !tokOK && !valOK:
		return nil, 0, nil
	case !tokOK || !valOK:
		return nil, 0, fmt.Errorf("redisfence: id %q: one of its two keys is missing (deleted or evicted?)", id)
	}
	tok, err := strconv.ParseInt(tokStr, 10, 64)
	if err != nil || tok < 1 {
		return nil, 0, fmt.Errorf("redisfence: id %q: token key holds %q, not a token", id, tokStr)
	}
	return []byte(valStr), backends.Token(tok), nil
}

// Resource returns the resource id of the store as a [fencing.Resource].
func (s *Store) Resource(id string) fencing.Resource { return resource{s, id} }

type resource struct {
	s  *Store
	id string
}

func (r resource) Write(ctx context.Context, token backends.Token, value []byte) error {
	return r.s.Write(ctx, r.id, token, value)
}

func (r resource) Read(ctx context.Context) ([]byte, backends.Token, error) {
	return r.s.Read(ctx, r.id)
}

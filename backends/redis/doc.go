// Package simbaredis is the Redis backend of Simba (placeholder; see below).
package simbaredis

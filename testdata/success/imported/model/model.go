// Package model holds item types that package imported uses from another
// package.
package model

// Order is an item type of another package.
type Order struct{ ID string }

// Page is a generic item type of another package.
type Page[T any] struct {
	Items []T
	Next  string
}

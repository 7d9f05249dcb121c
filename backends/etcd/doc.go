// Package simbaetcd is the etcd backend of Simba.
package simbaetcd

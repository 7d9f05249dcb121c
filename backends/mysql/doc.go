// Package simbamysql is the MySQL and MariaDB backend of Simba.
package simbamysql

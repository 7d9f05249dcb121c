module github.com/simba-go/simba/testdata

go 1.26.0

require github.com/simba-go/simba v0.0.0

replace github.com/simba-go/simba => ../

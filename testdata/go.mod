module github.com/simba-go/simba/testdata

go 1.26.0

require github.com/simba-go/simba v0.0.0

require github.com/robfig/cron/v3 v3.0.1 // indirect

replace github.com/simba-go/simba => ../

"""Analyses: functions over the IR that return data, which passes and checks then apply.

One module per question: ``devices`` (device status inference), ``op_args`` (Caffe2's argument
conventions: storage order, axes, conv/pool geometry), and the others listed in the package.
The package imports none of its modules itself, so a module the core needs does not drag in
the rest.
"""

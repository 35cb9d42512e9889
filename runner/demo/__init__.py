"""The ready-made demonstration (``isocost demo prepare``): BBC News texts and a MiniLM classifier.

Everything specific to the demo lives in this package; :mod:`runner.demo.build`
runs the build and names the steps and the modules that do them.
"""

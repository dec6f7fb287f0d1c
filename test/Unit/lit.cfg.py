# -*- Python -*-
# lit configuration that runs the GoogleTest unit suites (unittests/).

import os

import lit.formats

config.name = "MSAC-Unit"
config.suffixes = []
config.test_exec_root = os.path.join(config.msac_obj_root, "unittests")
config.test_source_root = config.test_exec_root
config.test_format = lit.formats.GoogleTest(".", "Tests")

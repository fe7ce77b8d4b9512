# lit configuration of sharc's FileCheck tests.
import os
import lit.formats

config.name = "sharc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".yaml"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(os.path.dirname(config.sharc_tools_dir),
                                     "tests", "lit")
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py.in", "Inputs"]

config.environment["PATH"] = os.pathsep.join(
    [config.sharc_tools_dir, config.llvm_tools_dir,
     config.environment.get("PATH", "")])
config.substitutions.append(("%sharc-opt", os.path.join(
    config.sharc_tools_dir, "sharc-opt")))
config.substitutions.append(("%sharc-run", os.path.join(
    config.sharc_tools_dir, "sharc-run")))
config.substitutions.append(("%sharc", os.path.join(
    config.sharc_tools_dir, "sharc")))
config.substitutions.append(("%models", os.path.join(
    config.sharc_source_dir, "models")))

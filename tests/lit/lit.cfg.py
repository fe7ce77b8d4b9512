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
# ASan reserves terabytes of address space for its shadow memory, so a test
# that bounds the address space (prlimit --as) cannot run under it.
if config.sharc_sanitize:
    config.available_features.add("asan")

# scripts/prepare-data.py runs in the repository's venv (scripts/setup.sh);
# its tests are UNSUPPORTED, not failed, where the venv lacks tokenizers.
venv_python = os.path.join(config.sharc_source_dir, ".venv", "bin", "python")
config.substitutions.append(("%venv-python", venv_python))
config.substitutions.append(("%scripts", os.path.join(
    config.sharc_source_dir, "scripts")))
config.substitutions.append(("%docs", os.path.join(
    config.sharc_source_dir, "docs")))
if os.path.exists(venv_python) and __import__("subprocess").call(
        [venv_python, "-c", "import tokenizers"]) == 0:
    config.available_features.add("tokenizers")

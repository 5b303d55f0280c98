// Run with the single-file launcher (ctest java_jar_native, java_library_path):
// loads io.simba without -Dsimba.jni.library and prints the library's version.
public class NativeJarCheck {
  public static void main(String[] args) {
    System.out.println(io.simba.Simba.version());
  }
}
